/* Built against the installed Debian packages (tests/install/test_deb.sh):
 * the version the header says against the library's, then a lock taken and
 * released on the Redis at argv[1]. Prints "ok <version>". */
#include <dlock/dlock.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    if (argc < 2 || strcmp(dlock_version(), DLOCK_VERSION_STRING) != 0) {
        fprintf(stderr, "usage: deb_consumer URL (header %s, library %s)\n",
                DLOCK_VERSION_STRING, dlock_version());
        return 1;
    }
    dlock_config *cfg = dlock_config_new();
    dlock_client *c = NULL;
    dlock_lock *l = NULL;
    int rc = cfg ? dlock_config_set_url(cfg, argv[1]) : DLOCK_ENOMEM;
    if (rc == DLOCK_OK)
        rc = dlock_client_open(&c, cfg);
    dlock_config_free(cfg);
    if (rc == DLOCK_OK)
        rc = dlock_lock_get(c, "deb-consumer", &l);
    if (rc == DLOCK_OK)
        rc = dlock_lock_try(l, 1000, 5000);
    if (rc == DLOCK_OK)
        rc = dlock_lock_release(l);
    if (rc != DLOCK_OK)
        fprintf(stderr, "%s: %s\n", dlock_strerror(rc), dlock_last_error());
    else
        printf("ok %s\n", dlock_version());
    dlock_lock_free(l);
    dlock_client_close(c);
    return rc == DLOCK_OK ? 0 : 1;
}
