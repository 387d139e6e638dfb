/* Loads the library by the soname its header implies, as a plugin system or
 * a language binding that opens "libattnkern.so.<ABI>" does: the installed
 * name must carry AK_ABI_VERSION, and the library found there must report it. */
#include <dlfcn.h>
#include <stdio.h>

#include <attnkern.h>

#define AK_STR2(x) #x
#define AK_STR(x) AK_STR2(x)

int main(int argc, char **argv) {
  if (argc != 2) return 2;
  char path[4096];
  snprintf(path, sizeof path, "%s/libattnkern.so.%s", argv[1], AK_STR(AK_ABI_VERSION));
  void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "%s\n", dlerror());
    return 1;
  }
  int (*abi)(void) = (int (*)(void))dlsym(lib, "ak_abi_version");
  if (!abi || abi() != AK_ABI_VERSION) {
    fprintf(stderr, "%s: ak_abi_version() is not %d\n", path, AK_ABI_VERSION);
    return 1;
  }
  printf("%s reports ABI %d: ok\n", path, abi());
  dlclose(lib);
  return 0;
}
