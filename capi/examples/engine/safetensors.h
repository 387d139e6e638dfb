/* Reading model.safetensors: an 8-byte little-endian header length, a JSON
 * header mapping each tensor name to {dtype, shape, data_offsets} (offsets
 * relative to the first byte after the header) and an optional
 * "__metadata__" object, then the tensors' bytes. */
#ifndef ENGINE_SAFETENSORS_H
#define ENGINE_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

enum { ST_MAX_DIMS = 8 };

typedef struct {
  char *name;
  char dtype[16]; /* as written: "F32", "F16", "BF16", ... */
  int elem_size;  /* bytes per element; 0 for a dtype this reader does not load */
  int ndim;
  int64_t shape[ST_MAX_DIMS];
  uint64_t begin, end; /* byte range inside the data section */
} st_tensor;

typedef struct {
  unsigned char *bytes; /* the whole file */
  uint64_t size;
  uint64_t data_start; /* 8 + header length */
  st_tensor *tensors;
  size_t count;
} st_file;

/* Reads and validates the file: the header parses, every tensor's range
   lies inside the file and matches its shape and dtype. 0, or -1 with err. */
int st_open(const char *path, st_file *f, char *err, size_t err_size);
void st_close(st_file *f);
const st_tensor *st_find(const st_file *f, const char *name);

/* Tensor `name`, which must have the given shape, widened to fp32 into out
   (F32, F16 or BF16; ak_convert widens exactly). 0, or -1 with err. */
int st_load_f32(const st_file *f, const char *name, int ndim, const int64_t *shape, float *out,
                char *err, size_t err_size);

#endif
