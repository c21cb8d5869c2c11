/* A program built against an installed dlock: the header, the version it
 * was built with against the library it runs with, and one call that goes
 * through the config parser. */
#include <dlock/dlock.h>
#include <stdio.h>
#include <string.h>

int main(void)
{
    if (strcmp(dlock_version(), DLOCK_VERSION_STRING) != 0) {
        fprintf(stderr, "header %s, library %s\n", DLOCK_VERSION_STRING, dlock_version());
        return 1;
    }
    dlock_config *cfg = dlock_config_new();
    if (!cfg) return 1;
    int rc = dlock_config_set_url(cfg, "ftp://nowhere");
    dlock_config_free(cfg);
    if (rc != DLOCK_EINVAL) {
        fprintf(stderr, "bad URL accepted: %s\n", dlock_strerror(rc));
        return 1;
    }
    printf("ok %s\n", dlock_version());
    return 0;
}
