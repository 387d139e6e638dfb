/* See gray_png.h. The format: the PNG signature, then chunks (length, type,
 * data, CRC-32 of type and data): IHDR, one IDAT holding a zlib stream, IEND.
 * The zlib stream is a 2-byte header, deflate blocks of type "stored" (at
 * most 65535 bytes each, after a 5-byte header), then the Adler-32 of the
 * uncompressed data: each image row is a filter byte (0, none) and its pixels. */
#include "gray_png.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* CRC-32 of ISO 3309 (reflected, polynomial 0xEDB88320), bit by bit: a table
   would be faster, but images here are small. */
static uint32_t crc32_update(uint32_t crc, const unsigned char *p, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    crc ^= p[i];
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  return crc;
}

static void put_be32(unsigned char *p, uint32_t v) {
  p[0] = (unsigned char)(v >> 24), p[1] = (unsigned char)(v >> 16);
  p[2] = (unsigned char)(v >> 8), p[3] = (unsigned char)v;
}

static int write_chunk(FILE *f, const char type[4], const unsigned char *data, size_t n) {
  unsigned char word[4];
  put_be32(word, (uint32_t)n);
  uint32_t crc = crc32_update(0xFFFFFFFFu, (const unsigned char *)type, 4);
  crc = crc32_update(crc, data, n) ^ 0xFFFFFFFFu;
  if (fwrite(word, 1, 4, f) != 4 || fwrite(type, 1, 4, f) != 4) return -1;
  if (n && fwrite(data, 1, n, f) != n) return -1;
  put_be32(word, crc);
  return fwrite(word, 1, 4, f) == 4 ? 0 : -1;
}

int gray_png_write(const char *path, int width, int height, const unsigned char *pixels) {
  static const unsigned char signature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  const size_t row = (size_t)width + 1, raw = row * (size_t)height;
  const size_t blocks = raw / 65535 + 1; /* + 1: an empty image still needs a final block */
  unsigned char *z = malloc(2 + raw + 5 * blocks + 4);
  if (!z) return -1;

  /* zlib header: deflate with a 32 KiB window, no dictionary; 0x7801 is a
     multiple of 31 as the format requires. */
  size_t n = 0;
  z[n++] = 0x78, z[n++] = 0x01;
  uint32_t a = 1, b = 0; /* Adler-32 */
  size_t left = raw, done = 0;
  for (size_t k = 0; k < blocks; ++k) {
    const size_t len = left < 65535 ? left : 65535;
    z[n++] = (unsigned char)(k + 1 == blocks); /* BFINAL; BTYPE 00 = stored */
    z[n++] = (unsigned char)len, z[n++] = (unsigned char)(len >> 8);
    z[n++] = (unsigned char)~len, z[n++] = (unsigned char)(~len >> 8);
    for (size_t i = 0; i < len; ++i, ++done) {
      const size_t col = done % row; /* column 0 is the row's filter byte */
      const unsigned char byte = col ? pixels[done / row * (size_t)width + col - 1] : 0;
      z[n++] = byte;
      a = (a + byte) % 65521, b = (b + a) % 65521;
    }
    left -= len;
  }
  put_be32(z + n, (b << 16) | a);
  n += 4;

  unsigned char ihdr[13];
  put_be32(ihdr, (uint32_t)width);
  put_be32(ihdr + 4, (uint32_t)height);
  ihdr[8] = 8;  /* bits per sample */
  ihdr[9] = 0;  /* colour type: grayscale */
  ihdr[10] = 0; /* compression: deflate */
  ihdr[11] = 0; /* filter method 0 */
  ihdr[12] = 0; /* no interlace */

  FILE *f = fopen(path, "wb");
  int rc = f ? 0 : -1;
  if (f) {
    if (fwrite(signature, 1, 8, f) != 8 || write_chunk(f, "IHDR", ihdr, sizeof ihdr) ||
        write_chunk(f, "IDAT", z, n) || write_chunk(f, "IEND", NULL, 0))
      rc = -1;
    if (fclose(f)) rc = -1;
  }
  free(z);
  return rc;
}
