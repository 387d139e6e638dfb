/* A small JSON reader for the two files a checkpoint directory needs:
 * config.json and the header of model.safetensors. It reads the whole of
 * RFC 8259 (objects, arrays, strings with escapes, numbers, true, false,
 * null) into a tree and refuses anything else with a message that says where. */
#ifndef ENGINE_JSON_H
#define ENGINE_JSON_H

#include <stddef.h>
#include <stdint.h>

typedef enum { JSON_NULL, JSON_BOOL, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT } json_type;

typedef struct json_value {
  json_type type;
  int boolean;
  double number;
  /* A number written as an integer (no fraction, no exponent) that fits in
     int64 also has is_integer set and its exact value here: safetensors
     offsets may exceed the 2^53 that a double holds exactly. */
  int is_integer;
  int64_t integer;
  char *string;             /* JSON_STRING: decoded UTF-8, NUL-terminated */
  size_t count;             /* JSON_ARRAY and JSON_OBJECT: number of items */
  struct json_value *items; /* their values */
  char **keys;              /* JSON_OBJECT: the key of each item (unique) */
} json_value;

/* Parses text[0 .. len) into *out. Returns 0, or -1 with a message in err. */
int json_parse(const char *text, size_t len, json_value *out, char *err, size_t err_size);
void json_free(json_value *v);

/* The member `key` of an object, or NULL if v is not an object or lacks it. */
const json_value *json_get(const json_value *v, const char *key);

#endif
