#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

static int get_int(const json_value *root, const char *key, int64_t fallback, int64_t *out,
                   char *err, size_t err_size) {
  const json_value *v = json_get(root, key);
  if (!v || v->type == JSON_NULL) {
    if (fallback < 0) return snprintf(err, err_size, "config.json: %s is missing", key), -1;
    *out = fallback;
    return 0;
  }
  if (!v->is_integer || v->integer <= 0 || v->integer > INT32_MAX)
    return snprintf(err, err_size, "config.json: %s must be a positive integer", key), -1;
  *out = v->integer;
  return 0;
}

static int get_number(const json_value *root, const char *key, double fallback, double *out,
                      char *err, size_t err_size) {
  const json_value *v = json_get(root, key);
  if (!v || v->type == JSON_NULL) {
    *out = fallback;
    return 0;
  }
  if (v->type != JSON_NUMBER || !(v->number > 0) || !isfinite(v->number))
    return snprintf(err, err_size, "config.json: %s must be a positive number", key), -1;
  *out = v->number;
  return 0;
}

/* True if `key` is set to anything but its default of false/absent/null. */
static int set_true(const json_value *root, const char *key) {
  const json_value *v = json_get(root, key);
  return v && !(v->type == JSON_NULL || (v->type == JSON_BOOL && !v->boolean));
}

static int check_features(const json_value *root, char *err, size_t err_size) {
  const json_value *v = json_get(root, "model_type");
  if (v && (v->type != JSON_STRING || strcmp(v->string, "llama") != 0))
    return snprintf(err, err_size, "config.json: model_type is not \"llama\""), -1;
  v = json_get(root, "hidden_act");
  if (v && (v->type != JSON_STRING || strcmp(v->string, "silu") != 0))
    return snprintf(err, err_size, "config.json: hidden_act must be \"silu\" (SwiGLU)"), -1;
  v = json_get(root, "rope_scaling");
  if (v && v->type != JSON_NULL) {
    const json_value *t = json_get(v, "rope_type");
    if (!t) t = json_get(v, "type");
    if (!t || t->type != JSON_STRING || strcmp(t->string, "default") != 0)
      return snprintf(err, err_size, "config.json: rope_scaling is not supported"), -1;
  }
  if (set_true(root, "attention_bias") || set_true(root, "mlp_bias"))
    return snprintf(err, err_size, "config.json: attention_bias/mlp_bias are not supported"), -1;
  return 0;
}

static int read_config(const json_value *root, llama_config *c, char *err, size_t err_size) {
  if (root->type != JSON_OBJECT)
    return snprintf(err, err_size, "config.json: not a JSON object"), -1;
  if (check_features(root, err, err_size)) return -1;
  if (get_int(root, "hidden_size", -1, &c->hidden, err, err_size) ||
      get_int(root, "intermediate_size", -1, &c->intermediate, err, err_size) ||
      get_int(root, "num_attention_heads", -1, &c->heads, err, err_size) ||
      get_int(root, "num_hidden_layers", -1, &c->layers, err, err_size) ||
      get_int(root, "vocab_size", -1, &c->vocab, err, err_size) ||
      get_int(root, "num_key_value_heads", c->heads, &c->kv_heads, err, err_size) ||
      get_int(root, "head_dim", c->hidden / c->heads, &c->head_dim, err, err_size) ||
      get_int(root, "max_position_embeddings", 2048, &c->max_positions, err, err_size) ||
      get_number(root, "rms_norm_eps", 1e-6, &c->rms_norm_eps, err, err_size) ||
      get_number(root, "rope_theta", 10000.0, &c->rope_theta, err, err_size))
    return -1;
  /* transformers 5 writes rope_theta and the scaling into rope_parameters. */
  const json_value *rp = json_get(root, "rope_parameters");
  if (rp && rp->type != JSON_NULL) {
    if (rp->type != JSON_OBJECT)
      return snprintf(err, err_size, "config.json: rope_parameters must be an object"), -1;
    const json_value *t = json_get(rp, "rope_type");
    if (t && (t->type != JSON_STRING || strcmp(t->string, "default") != 0))
      return snprintf(err, err_size,
                      "config.json: rope_parameters: only rope_type \"default\" "
                      "is supported (no RoPE scaling)"),
             -1;
    double theta;
    if (get_number(rp, "rope_theta", c->rope_theta, &theta, err, err_size)) return -1;
    if (json_get(root, "rope_theta") && theta != c->rope_theta)
      return snprintf(err, err_size,
                      "config.json: rope_theta and rope_parameters.rope_theta "
                      "differ"),
             -1;
    c->rope_theta = theta;
  }
  if (c->head_dim <= 0)
    return snprintf(err, err_size, "config.json: head_dim must be positive"), -1;
  if (c->heads % c->kv_heads != 0)
    return snprintf(err, err_size,
                    "config.json: num_attention_heads %lld is not a multiple of "
                    "num_key_value_heads %lld",
                    (long long)c->heads, (long long)c->kv_heads),
           -1;
  if (c->head_dim % 2 != 0)
    return snprintf(err, err_size, "config.json: head_dim %lld is odd (RoPE rotates pairs)",
                    (long long)c->head_dim),
           -1;
  const json_value *v = json_get(root, "tie_word_embeddings");
  if (v && v->type != JSON_BOOL && v->type != JSON_NULL)
    return snprintf(err, err_size, "config.json: tie_word_embeddings must be true or false"), -1;
  c->tie_word_embeddings = v && v->type == JSON_BOOL && v->boolean;
  v = json_get(root, "torch_dtype");
  if (v && v->type == JSON_STRING) snprintf(c->torch_dtype, sizeof c->torch_dtype, "%s", v->string);
  return 0;
}

int config_load(const char *path, llama_config *c, char *err, size_t err_size) {
  memset(c, 0, sizeof *c);
  FILE *in = fopen(path, "rb");
  if (!in) return snprintf(err, err_size, "%s: cannot open", path), -1;
  char *text = NULL;
  size_t len = 0, cap = 0, got;
  do { /* config.json is small: read it in growing chunks */
    if (len == cap) {
      char *grown = cap < (1u << 24) ? realloc(text, cap = cap ? 2 * cap : 4096) : NULL;
      if (!grown) {
        free(text), fclose(in);
        return snprintf(err, err_size, "%s: too large for a config", path), -1;
      }
      text = grown;
    }
    got = fread(text + len, 1, cap - len, in);
    len += got;
  } while (got > 0);
  fclose(in);
  json_value root;
  char why[256];
  int rc = json_parse(text, len, &root, why, sizeof why);
  free(text);
  if (rc) return snprintf(err, err_size, "%s: %s", path, why), -1;
  rc = read_config(&root, c, err, err_size);
  json_free(&root);
  return rc;
}
