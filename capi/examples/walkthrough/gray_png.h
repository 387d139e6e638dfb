/* An 8-bit grayscale PNG writer in plain C99, no zlib: the image data go in
 * stored (uncompressed) deflate blocks, which every PNG reader accepts. */
#ifndef ATTNKERN_WALKTHROUGH_GRAY_PNG_H
#define ATTNKERN_WALKTHROUGH_GRAY_PNG_H

/* pixels: height rows of width bytes, 0 black to 255 white, top row first.
   Returns 0 on success, -1 if the file could not be written (errno says why). */
int gray_png_write(const char *path, int width, int height, const unsigned char *pixels);

#endif
