/* Calls the plugin, which carries attnkern inside. */
#include <stdio.h>

int plugin_softmax_ok(void);

int main(void) {
  if (!plugin_softmax_ok()) return 1;
  printf("plugin with attnkern inside: ok\n");
  return 0;
}
