/* Recursive descent over the text, with a depth limit so that hostile input
 * cannot exhaust the stack. Every failure names its byte offset. */
#include "json.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_DEPTH = 64 };

typedef struct {
  const char *s;
  size_t len, at;
  char *err;
  size_t err_size;
} parser;

static int fail(parser *p, const char *fmt, ...) {
  char what[160];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  snprintf(p->err, p->err_size, "JSON: %s at byte %zu", what, p->at);
  return -1;
}

static void skip_space(parser *p) {
  while (p->at < p->len &&
         (p->s[p->at] == ' ' || p->s[p->at] == '\t' || p->s[p->at] == '\n' || p->s[p->at] == '\r'))
    ++p->at;
}

static int parse_value(parser *p, json_value *v, int depth);

static int hex4(parser *p, unsigned *out) {
  if (p->len - p->at < 4) return fail(p, "truncated \\u escape");
  unsigned u = 0;
  for (int i = 0; i < 4; ++i) {
    char c = p->s[p->at++];
    u <<= 4;
    if (c >= '0' && c <= '9')
      u |= (unsigned)(c - '0');
    else if (c >= 'a' && c <= 'f')
      u |= (unsigned)(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F')
      u |= (unsigned)(c - 'A' + 10);
    else
      return fail(p, "bad hex digit in \\u escape");
  }
  *out = u;
  return 0;
}

/* Appends code point cp as UTF-8 (the buffer has room: an escape of 6 or 12
   bytes never decodes to more than 4). */
static size_t put_utf8(char *o, unsigned cp) {
  if (cp < 0x80) return o[0] = (char)cp, 1;
  if (cp < 0x800) return o[0] = (char)(0xC0 | cp >> 6), o[1] = (char)(0x80 | (cp & 0x3F)), 2;
  if (cp < 0x10000) {
    o[0] = (char)(0xE0 | cp >> 12), o[1] = (char)(0x80 | (cp >> 6 & 0x3F));
    o[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
  }
  o[0] = (char)(0xF0 | cp >> 18), o[1] = (char)(0x80 | (cp >> 12 & 0x3F));
  o[2] = (char)(0x80 | (cp >> 6 & 0x3F)), o[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

/* A string starting at the opening quote; *out is malloc'ed. The decoded
   text is never longer than the source, so one buffer of that size holds it. */
static int parse_string(parser *p, char **out) {
  size_t start = ++p->at, end = start;
  while (end < p->len && p->s[end] != '"') end += p->s[end] == '\\' ? 2 : 1;
  if (end >= p->len) return fail(p, "unterminated string");
  char *o = malloc(end - start + 1);
  if (!o) return fail(p, "out of memory");
  size_t n = 0;
  while (p->at < end) {
    unsigned char c = (unsigned char)p->s[p->at];
    if (c < 0x20) return free(o), fail(p, "control character in string");
    if (c != '\\') {
      o[n++] = (char)c, ++p->at;
      continue;
    }
    char e = p->s[++p->at];
    ++p->at;
    switch (e) {
    case '"':
      o[n++] = '"';
      break;
    case '\\':
      o[n++] = '\\';
      break;
    case '/':
      o[n++] = '/';
      break;
    case 'b':
      o[n++] = '\b';
      break;
    case 'f':
      o[n++] = '\f';
      break;
    case 'n':
      o[n++] = '\n';
      break;
    case 'r':
      o[n++] = '\r';
      break;
    case 't':
      o[n++] = '\t';
      break;
    case 'u': {
      unsigned cp, lo;
      if (hex4(p, &cp)) return free(o), -1;
      if (cp >= 0xD800 && cp < 0xDC00) { /* a surrogate pair: the low half must follow */
        if (p->at + 6 > end || p->s[p->at] != '\\' || p->s[p->at + 1] != 'u')
          return free(o), fail(p, "unpaired surrogate in \\u escape");
        p->at += 2;
        if (hex4(p, &lo)) return free(o), -1;
        if (lo < 0xDC00 || lo > 0xDFFF) return free(o), fail(p, "bad low surrogate");
        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
      } else if (cp >= 0xDC00 && cp < 0xE000) {
        return free(o), fail(p, "unpaired surrogate in \\u escape");
      }
      if (cp == 0) return free(o), fail(p, "\\u0000 in string (names are C strings)");
      n += put_utf8(o + n, cp);
      break;
    }
    default:
      return free(o), fail(p, "bad escape '\\%c'", e);
    }
  }
  if (p->at != end) return free(o), fail(p, "escape runs past the closing quote");
  ++p->at; /* the closing quote */
  o[n] = '\0';
  *out = o;
  return 0;
}

static int is_digit(char c) { return c >= '0' && c <= '9'; }

/* The grammar is checked here; strtod then converts the checked text (the C
   locale's decimal point is '.', which a program that never calls setlocale has). */
static int parse_number(parser *p, json_value *v) {
  size_t start = p->at;
  int integral = 1;
  if (p->at < p->len && p->s[p->at] == '-') ++p->at;
  if (p->at >= p->len || !is_digit(p->s[p->at])) return fail(p, "bad number");
  if (p->s[p->at] == '0')
    ++p->at;
  else
    while (p->at < p->len && is_digit(p->s[p->at])) ++p->at;
  if (p->at < p->len && p->s[p->at] == '.') {
    integral = 0, ++p->at;
    if (p->at >= p->len || !is_digit(p->s[p->at])) return fail(p, "bad fraction");
    while (p->at < p->len && is_digit(p->s[p->at])) ++p->at;
  }
  if (p->at < p->len && (p->s[p->at] == 'e' || p->s[p->at] == 'E')) {
    integral = 0, ++p->at;
    if (p->at < p->len && (p->s[p->at] == '+' || p->s[p->at] == '-')) ++p->at;
    if (p->at >= p->len || !is_digit(p->s[p->at])) return fail(p, "bad exponent");
    while (p->at < p->len && is_digit(p->s[p->at])) ++p->at;
  }
  char buf[64];
  size_t n = p->at - start;
  if (n >= sizeof buf) return fail(p, "number too long");
  memcpy(buf, p->s + start, n);
  buf[n] = '\0';
  v->type = JSON_NUMBER;
  v->number = strtod(buf, NULL);
  if (integral) {
    errno = 0;
    long long i = strtoll(buf, NULL, 10);
    if (errno == 0) v->is_integer = 1, v->integer = i;
  }
  return 0;
}

static int literal(parser *p, const char *word) {
  size_t n = strlen(word);
  if (p->len - p->at < n || memcmp(p->s + p->at, word, n) != 0) return fail(p, "unexpected text");
  p->at += n;
  return 0;
}

/* Appends an empty slot to an array or object under construction. */
static json_value *grow(parser *p, json_value *v, size_t *cap) {
  if (v->count == *cap) {
    size_t c = *cap ? 2 * *cap : 8;
    json_value *items = realloc(v->items, c * sizeof *items);
    if (!items) return fail(p, "out of memory"), NULL;
    v->items = items;
    if (v->type == JSON_OBJECT) {
      char **keys = realloc(v->keys, c * sizeof *keys);
      if (!keys) return fail(p, "out of memory"), NULL;
      v->keys = keys;
    }
    *cap = c;
  }
  json_value *slot = &v->items[v->count];
  memset(slot, 0, sizeof *slot);
  return slot;
}

static int parse_container(parser *p, json_value *v, int depth) {
  const int object = p->s[p->at] == '{';
  const char close = object ? '}' : ']';
  size_t cap = 0;
  v->type = object ? JSON_OBJECT : JSON_ARRAY;
  ++p->at;
  skip_space(p);
  if (p->at < p->len && p->s[p->at] == close) return ++p->at, 0;
  for (;;) {
    char *key = NULL;
    skip_space(p);
    if (object) {
      if (p->at >= p->len || p->s[p->at] != '"') return fail(p, "expected a key");
      if (parse_string(p, &key)) return -1;
      for (size_t i = 0; i < v->count; ++i)
        if (strcmp(v->keys[i], key) == 0) {
          fail(p, "duplicate key \"%.60s\"", key);
          return free(key), -1;
        }
      skip_space(p);
      if (p->at >= p->len || p->s[p->at] != ':') return free(key), fail(p, "expected ':'");
      ++p->at;
    }
    json_value *slot = grow(p, v, &cap);
    if (!slot) return free(key), -1;
    if (object) v->keys[v->count] = key;
    ++v->count; /* counted before parsing, so that json_free releases a partial item */
    if (parse_value(p, slot, depth + 1)) return -1;
    skip_space(p);
    if (p->at < p->len && p->s[p->at] == ',') {
      ++p->at;
      continue;
    }
    if (p->at < p->len && p->s[p->at] == close) return ++p->at, 0;
    return fail(p, object ? "expected ',' or '}'" : "expected ',' or ']'");
  }
}

static int parse_value(parser *p, json_value *v, int depth) {
  if (depth > MAX_DEPTH) return fail(p, "nested deeper than %d", MAX_DEPTH);
  skip_space(p);
  if (p->at >= p->len) return fail(p, "unexpected end of input");
  switch (p->s[p->at]) {
  case '{':
  case '[':
    return parse_container(p, v, depth);
  case '"':
    v->type = JSON_STRING;
    return parse_string(p, &v->string);
  case 't':
    v->type = JSON_BOOL, v->boolean = 1;
    return literal(p, "true");
  case 'f':
    v->type = JSON_BOOL;
    return literal(p, "false");
  case 'n':
    v->type = JSON_NULL;
    return literal(p, "null");
  default:
    return parse_number(p, v);
  }
}

int json_parse(const char *text, size_t len, json_value *out, char *err, size_t err_size) {
  parser p = {text, len, 0, err, err_size};
  memset(out, 0, sizeof *out);
  if (parse_value(&p, out, 0) == 0) {
    skip_space(&p);
    if (p.at == p.len) return 0;
    fail(&p, "trailing text after the value");
  }
  json_free(out);
  return -1;
}

void json_free(json_value *v) {
  if (!v) return;
  for (size_t i = 0; i < v->count; ++i) {
    json_free(&v->items[i]);
    if (v->keys) free(v->keys[i]);
  }
  free(v->items);
  free(v->keys);
  free(v->string);
  memset(v, 0, sizeof *v);
}

const json_value *json_get(const json_value *v, const char *key) {
  if (!v || v->type != JSON_OBJECT) return NULL;
  for (size_t i = 0; i < v->count; ++i)
    if (strcmp(v->keys[i], key) == 0) return &v->items[i];
  return NULL;
}
