/* Cross-attention with q_len != kv_len: the 14 tokens of a French sentence
 * attend to the 13 of its English original. The words become vectors through
 * ak_embedding (an unknown word is id -1, a zero row), ak_attention returns
 * the attention weights in its probs output, and the alignment is saved as a
 * heat map (a grayscale PNG: one row per French word, one column per English
 * one, white = weight 1).
 *
 *   cc cross_attention.c gray_png.c -I<prefix>/include -L<prefix>/lib -lattnkern -lm \
 *      -o cross_attention
 *   ./cross_attention embeddings.txt [heatmap.png (default cross_attention_c.png)]
 *
 * check_c_output.py checks the printed weights against float64;
 * cross_attention.py is the same in Python, with the words on the map's axes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attnkern.h"
#include "gray_png.h"

#define AK_CHECK(call)                                                                             \
  do {                                                                                             \
    ak_status st_ = (call);                                                                        \
    if (st_ != AK_OK) {                                                                            \
      fprintf(stderr, "%s failed: %s\n  %s\n", #call, ak_status_string(st_), ak_last_error());     \
      return EXIT_FAILURE;                                                                         \
    }                                                                                              \
  } while (0)

enum { FR = 14, EN = 13, MAX_WORDS = 256, MAX_DIM = 64, MAX_WORD = 32, CELL = 20 };

/* The sentence pair of Bahdanau, Cho and Bengio's alignment figure (2014),
   lower-cased and split into tokens as the vocabulary has them. */
static const char *const french[FR] = {"l'",         "accord",     "sur",  "la",  "zone",
                                       "économique", "européenne", "a",    "été", "signé",
                                       "en",         "août",       "1992", "."};
static const char *const english[EN] = {"the",      "agreement", "on",  "the",    "european",
                                        "economic", "area",      "was", "signed", "in",
                                        "august",   "1992",      "."};

static char vocab[MAX_WORDS][MAX_WORD];
static float table[MAX_WORDS * MAX_DIM];

/* Reads "word x_1 ... x_dim" lines ('#' lines are comments); returns the
   number of words and sets *dim, or -1 on a malformed file. */
static int read_vocabulary(const char *path, int *dim) {
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  char line[4096];
  int n = 0;
  *dim = 0;
  while (fgets(line, sizeof line, f)) {
    char *tok = strtok(line, " \t\r\n");
    if (!tok || tok[0] == '#') continue;
    if (n == MAX_WORDS || strlen(tok) >= MAX_WORD) break;
    strcpy(vocab[n], tok);
    int d = 0;
    while ((tok = strtok(NULL, " \t\r\n")) && d < MAX_DIM)
      table[n * MAX_DIM + d++] = strtof(tok, NULL);
    if (tok || d == 0 || (*dim && d != *dim)) break; /* too many numbers, none, or a new count */
    *dim = d, ++n;
  }
  const int ok = feof(f);
  fclose(f);
  return ok ? n : -1;
}

/* The tokenizer: a word's row in the table, or -1 for a word it lacks. */
static int token_id(const char *word, int vocab_size) {
  for (int i = 0; i < vocab_size; ++i)
    if (strcmp(vocab[i], word) == 0) return i;
  return -1;
}

/* Pads a UTF-8 word to width columns: printf counts bytes, and "é" is two. */
static void print_padded(const char *word, int width) {
  int columns = 0;
  for (const char *p = word; *p; ++p) columns += ((unsigned char)*p & 0xC0) != 0x80;
  printf("%s%*s", word, width > columns ? width - columns : 0, "");
}

/* Prints a step as "-- title [rows x cols]" and one labelled row a line (the
 * layout check_c_output.py reads). */
static void show(const char *title, const float *m, int rows, int cols, const char *const *labels) {
  printf("-- %s [%d x %d]\n", title, rows, cols);
  for (int r = 0; r < rows; ++r) {
    print_padded(labels[r], 12);
    for (int c = 0; c < cols; ++c) printf("%11.6f", m[r * cols + c]);
    printf("\n");
  }
}

int main(int argc, char **argv) {
  if (argc < 2 || argc > 3) {
    fprintf(stderr, "usage: %s embeddings.txt [heatmap.png]\n", argv[0]);
    return EXIT_FAILURE;
  }
  const char *png_path = argc == 3 ? argv[2] : "cross_attention_c.png";
  int dim;
  const int vocab_size = read_vocabulary(argv[1], &dim);
  if (vocab_size <= 0) {
    fprintf(stderr, "%s: not a file of word vectors\n", argv[1]);
    return EXIT_FAILURE;
  }
  printf("%d words of %d dimensions from %s\n", vocab_size, dim, argv[1]);

  int32_t fr_ids[FR], en_ids[EN];
  printf("french ids:");
  for (int i = 0; i < FR; ++i) {
    fr_ids[i] = token_id(french[i], vocab_size);
    printf(" %s=%d", french[i], fr_ids[i]);
  }
  printf("\nenglish ids:");
  for (int j = 0; j < EN; ++j) {
    en_ids[j] = token_id(english[j], vocab_size);
    printf(" %s=%d", english[j], en_ids[j]);
  }
  printf("\n");

  /* Queries are the French words, keys and values the English ones. (A
     trained model would project them first, as self_attention.c does.) The
     unknown "a" gets a zero query, so all its scores are 0: uniform weights. */
  static float q[FR * MAX_DIM], kv[EN * MAX_DIM], out[FR * MAX_DIM], context[FR * MAX_DIM];
  AK_CHECK(ak_embedding(FR, fr_ids, vocab_size, dim, table, MAX_DIM, q, dim));
  AK_CHECK(ak_embedding(EN, en_ids, vocab_size, dim, table, MAX_DIM, kv, dim));

  /* One batch, one head, 14 queries over 13 keys; probs receives the
     softmax of the scaled scores, [batch, head, q_len, kv_len]. */
  float probs[FR * EN];
  ak_attention_desc d;
  ak_attention_desc_init(&d);
  d.batch = 1, d.num_heads = 1, d.num_kv_heads = 1;
  d.q_len = FR, d.kv_len = EN, d.head_dim = dim; /* scale 0 = 1/sqrt(dim) */
  d.probs = probs;
  AK_CHECK(ak_attention(&d, q, kv, kv, out));
  show("attention weights (columns: the english words)", probs, FR, EN, french);

  /* The weights are those that made out: probs times the values again. */
  AK_CHECK(ak_sgemm(AK_NO_TRANS, AK_NO_TRANS, FR, dim, EN, 1.0f, probs, EN, kv, dim, 0.0f, context,
                    dim));
  float diff = 0.0f, worst_sum = 0.0f;
  for (int i = 0; i < FR * dim; ++i) diff = fmaxf(diff, fabsf(out[i] - context[i]));
  printf("max |out - probs v| = %.1e\n", (double)diff);

  printf("alignment (each french word's largest weight):\n");
  for (int i = 0; i < FR; ++i) {
    int best = 0;
    float sum = 0.0f;
    for (int j = 0; j < EN; ++j) {
      sum += probs[i * EN + j];
      if (probs[i * EN + j] > probs[i * EN + best]) best = j;
    }
    worst_sum = fmaxf(worst_sum, fabsf(sum - 1.0f));
    printf("  ");
    print_padded(french[i], 12);
    printf(" -> %-10s %.3f%s\n", english[best], (double)probs[i * EN + best],
           fr_ids[i] < 0 ? "  (unknown word: uniform)" : "");
  }
  printf("max |row sum - 1| = %.1e\n", (double)worst_sum);

  /* The heat map: each weight a CELL x CELL square, brightness = weight. */
  static unsigned char pixels[FR * CELL * EN * CELL];
  for (int y = 0; y < FR * CELL; ++y)
    for (int x = 0; x < EN * CELL; ++x)
      pixels[y * EN * CELL + x] = (unsigned char)lrintf(255.0f * probs[y / CELL * EN + x / CELL]);
  if (gray_png_write(png_path, EN * CELL, FR * CELL, pixels) != 0) {
    perror(png_path);
    return EXIT_FAILURE;
  }
  printf("heat map: %s (%d x %d pixels)\n", png_path, EN * CELL, FR * CELL);
  return diff <= 1e-5f && worst_sum <= 1e-5f ? EXIT_SUCCESS : EXIT_FAILURE;
}
