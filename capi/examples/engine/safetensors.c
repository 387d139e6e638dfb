/* The file is read whole: the engine widens every tensor to fp32 once at
 * load time, so the bytes are needed only until then. Nothing in the header
 * is trusted: sizes are checked for overflow and against the file size. */
#include "safetensors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attnkern.h"
#include "json.h"

static int element_size(const char *dtype) {
  if (strcmp(dtype, "F32") == 0) return 4;
  if (strcmp(dtype, "F16") == 0 || strcmp(dtype, "BF16") == 0) return 2;
  return 0;
}

static int read_file(const char *path, st_file *f, char *err, size_t err_size) {
  FILE *in = fopen(path, "rb");
  if (!in) return snprintf(err, err_size, "%s: cannot open", path), -1;
  long size = -1;
  if (fseek(in, 0, SEEK_END) == 0) size = ftell(in);
  if (size < 0 || fseek(in, 0, SEEK_SET) != 0) {
    fclose(in);
    return snprintf(err, err_size, "%s: cannot tell its size", path), -1;
  }
  f->size = (uint64_t)size;
  f->bytes = malloc(size > 0 ? (size_t)size : 1);
  if (!f->bytes) {
    fclose(in);
    return snprintf(err, err_size, "%s: out of memory for %ld bytes", path, size), -1;
  }
  size_t got = fread(f->bytes, 1, (size_t)size, in);
  fclose(in);
  if (got != (size_t)size) return snprintf(err, err_size, "%s: read error", path), -1;
  return 0;
}

/* One header entry, the tensor `name`, into *t. */
static int read_entry(const st_file *f, const char *name, const json_value *e, st_tensor *t,
                      char *err, size_t err_size) {
  const json_value *dtype = json_get(e, "dtype"), *shape = json_get(e, "shape");
  const json_value *offsets = json_get(e, "data_offsets");
  if (!dtype || dtype->type != JSON_STRING || !shape || shape->type != JSON_ARRAY || !offsets ||
      offsets->type != JSON_ARRAY)
    return snprintf(err, err_size, "tensor %s: needs dtype, shape and data_offsets", name), -1;
  if (strlen(dtype->string) >= sizeof t->dtype)
    return snprintf(err, err_size, "tensor %s: unknown dtype", name), -1;
  strcpy(t->dtype, dtype->string);
  t->elem_size = element_size(t->dtype);
  if (shape->count > ST_MAX_DIMS)
    return snprintf(err, err_size, "tensor %s: more than %d dimensions", name, ST_MAX_DIMS), -1;
  t->ndim = (int)shape->count;
  uint64_t elements = 1;
  for (int i = 0; i < t->ndim; ++i) {
    const json_value *d = &shape->items[i];
    if (!d->is_integer || d->integer < 0)
      return snprintf(err, err_size, "tensor %s: shape entries must be integers >= 0", name), -1;
    t->shape[i] = d->integer;
    if (d->integer != 0 && elements > UINT64_MAX / (uint64_t)d->integer)
      return snprintf(err, err_size, "tensor %s: size overflows", name), -1;
    elements *= (uint64_t)d->integer;
  }
  if (offsets->count != 2 || !offsets->items[0].is_integer || !offsets->items[1].is_integer ||
      offsets->items[0].integer < 0 || offsets->items[1].integer < offsets->items[0].integer)
    return snprintf(err, err_size, "tensor %s: data_offsets must be [begin, end], begin <= end",
                    name),
           -1;
  t->begin = (uint64_t)offsets->items[0].integer, t->end = (uint64_t)offsets->items[1].integer;
  if (t->end > f->size - f->data_start)
    return snprintf(err, err_size,
                    "tensor %s: data_offsets end %llu past the data section (%llu bytes): "
                    "truncated file?",
                    name, (unsigned long long)t->end,
                    (unsigned long long)(f->size - f->data_start)),
           -1;
  if (t->elem_size && (elements > UINT64_MAX / (uint64_t)t->elem_size ||
                       t->end - t->begin != elements * (uint64_t)t->elem_size))
    return snprintf(err, err_size, "tensor %s: %llu bytes do not hold its shape in %s", name,
                    (unsigned long long)(t->end - t->begin), t->dtype),
           -1;
  return 0;
}

int st_open(const char *path, st_file *f, char *err, size_t err_size) {
  memset(f, 0, sizeof *f);
  const uint16_t one = 1;
  if (*(const unsigned char *)&one != 1) /* the tensors' bytes are read as they lie */
    return snprintf(err, err_size, "%s: safetensors is little-endian; this host is not", path), -1;
  if (read_file(path, f, err, err_size)) return st_close(f), -1;
  if (f->size < 8) {
    snprintf(err, err_size, "%s: %llu bytes, too short for a safetensors file", path,
             (unsigned long long)f->size);
    return st_close(f), -1;
  }
  uint64_t header = 0;
  for (int i = 7; i >= 0; --i) header = header << 8 | f->bytes[i];
  if (header > f->size - 8) {
    snprintf(err, err_size, "%s: header length %llu past the end of the file (%llu bytes)", path,
             (unsigned long long)header, (unsigned long long)f->size);
    return st_close(f), -1;
  }
  f->data_start = 8 + header;
  json_value root;
  char why[256];
  if (json_parse((const char *)f->bytes + 8, (size_t)header, &root, why, sizeof why)) {
    st_close(f);
    return snprintf(err, err_size, "%s: header: %s", path, why), -1;
  }
  int rc = 0;
  if (root.type != JSON_OBJECT) {
    rc = -1, snprintf(err, err_size, "%s: the header is not a JSON object", path);
  } else if (!(f->tensors = calloc(root.count ? root.count : 1, sizeof *f->tensors))) {
    rc = -1, snprintf(err, err_size, "%s: out of memory", path);
  }
  for (size_t i = 0; rc == 0 && i < root.count; ++i) {
    if (strcmp(root.keys[i], "__metadata__") == 0) {
      if (root.items[i].type != JSON_OBJECT)
        rc = -1, snprintf(err, err_size, "%s: __metadata__ is not an object", path);
      continue;
    }
    if (root.items[i].type != JSON_OBJECT) {
      rc = -1, snprintf(err, err_size, "%s: entry %s is not an object", path, root.keys[i]);
      break;
    }
    st_tensor *t = &f->tensors[f->count];
    if (read_entry(f, root.keys[i], &root.items[i], t, why, sizeof why)) {
      rc = -1, snprintf(err, err_size, "%s: %s", path, why);
      break;
    }
    t->name = root.keys[i], root.keys[i] = NULL; /* the name moves to the tensor */
    ++f->count;
  }
  /* json_free skips the moved keys (free(NULL)). */
  json_free(&root);
  if (rc) st_close(f);
  return rc;
}

void st_close(st_file *f) {
  for (size_t i = 0; i < f->count; ++i) free(f->tensors[i].name);
  free(f->tensors);
  free(f->bytes);
  memset(f, 0, sizeof *f);
}

const st_tensor *st_find(const st_file *f, const char *name) {
  for (size_t i = 0; i < f->count; ++i)
    if (strcmp(f->tensors[i].name, name) == 0) return &f->tensors[i];
  return NULL;
}

int st_load_f32(const st_file *f, const char *name, int ndim, const int64_t *shape, float *out,
                char *err, size_t err_size) {
  const st_tensor *t = st_find(f, name);
  if (!t) return snprintf(err, err_size, "tensor %s is missing from the checkpoint", name), -1;
  int same = t->ndim == ndim;
  for (int i = 0; same && i < ndim; ++i) same = t->shape[i] == shape[i];
  if (!same) {
    char want[128] = "", have[128] = "";
    for (int i = 0; i < ndim; ++i)
      snprintf(want + strlen(want), sizeof want - strlen(want), "%s%lld", i ? ", " : "",
               (long long)shape[i]);
    for (int i = 0; i < t->ndim; ++i)
      snprintf(have + strlen(have), sizeof have - strlen(have), "%s%lld", i ? ", " : "",
               (long long)t->shape[i]);
    return snprintf(err, err_size, "tensor %s has shape [%s], config.json implies [%s]", name, have,
                    want),
           -1;
  }
  if (!t->elem_size)
    return snprintf(err, err_size, "tensor %s: dtype %s is not supported (F32, F16, BF16 are)",
                    name, t->dtype),
           -1;
  const unsigned char *src = f->bytes + f->data_start + t->begin;
  const uint64_t n = (t->end - t->begin) / (uint64_t)t->elem_size;
  if (t->elem_size == 4) { /* little-endian, like the host (st_open checked) */
    memcpy(out, src, (size_t)(t->end - t->begin));
    return 0;
  }
  /* ak_convert reads 16-bit elements: the data section need not be aligned. */
  void *aligned = NULL;
  if ((uintptr_t)src % 2 != 0) {
    if (!(aligned = malloc((size_t)(t->end - t->begin))))
      return snprintf(err, err_size, "tensor %s: out of memory", name), -1;
    memcpy(aligned, src, (size_t)(t->end - t->begin));
    src = aligned;
  }
  ak_dtype type = strcmp(t->dtype, "F16") == 0 ? AK_F16 : AK_BF16;
  ak_status st = ak_convert(AK_F32, out, type, src, (int64_t)n);
  free(aligned);
  if (st != AK_OK)
    return snprintf(err, err_size, "tensor %s: ak_convert: %s", name, ak_last_error()), -1;
  return 0;
}
