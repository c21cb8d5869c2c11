/* dlock revoke [--note TEXT] NAME: asks the holders of lock NAME to let it
 * go (dlock_lock_request_revoke). Nothing is forced: a holder that listens
 * (a dlock run: its --on-revoke; a program: its revoke handler) decides.
 * Exit 0: held, and the request was heard; 1: free, nobody to ask; 2: held,
 * but nobody listening (a holder without a handler: Redisson, a program that
 * set none); 65 not a lock; the usual codes for the rest. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

enum { REVOKE_FREE = 1, REVOKE_UNHEARD = 2 };

int cmd_revoke(cli_opts *o, int argc, char **argv)
{
    const char *name = NULL, *note = NULL, *val;
    int r;
    for (int i = 1; i < argc; i++) {
        if ((r = cli_opt_value(o, "revoke", argc, argv, &i, "--note", NULL, &val)) != 0) {
            if (r < 0)
                return EXIT_USAGE;
            note = val;
        } else if ((r = cli_opt_value(o, "revoke", argc, argv, &i, "--name", NULL, &val)) != 0) {
            if (r < 0)
                return EXIT_USAGE;
            if (name) {
                cli_usage_error(o, "revoke", "one lock NAME");
                return EXIT_USAGE;
            }
            name = val;
        } else if ((r = cli_global_opt(o, argc, argv, &i)) != 0) {
            if (r < 0)
                return EXIT_USAGE;
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            cli_usage_error(o, "revoke", "unknown option '%s'", argv[i]);
            return EXIT_USAGE;
        } else if (name) {
            cli_usage_error(o, "revoke", "one lock NAME");
            return EXIT_USAGE;
        } else {
            name = argv[i];
        }
    }
    if (!name) {
        cli_usage_error(o, "revoke", "missing lock NAME");
        return EXIT_USAGE;
    }
    if (note && strlen(note) > DLOCK_REVOKE_NOTE_MAX) {
        cli_usage_error(o, "revoke", "--note: at most %d bytes", DLOCK_REVOKE_NOTE_MAX);
        return EXIT_USAGE;
    }
    dlock_client *c;
    o->label = "revoke";
    int code = cli_open(o, &c, NULL, NULL);
    if (code)
        return code;
    dlock_lock *l = NULL;
    dlock_revoke_answer ans = {0, 0};
    int rc = dlock_lock_get(c, name, &l);
    if (rc == DLOCK_OK)
        rc = dlock_lock_request_revoke(l, note, &ans);
    char nm[300];
    cli_esc(name, nm, sizeof(nm));
    if (rc != DLOCK_OK) {
        code = cli_fail_key(o, c, rc, "revoke", name, DLOCK_KIND_LOCK, "a lock");
    } else if (ans.holders == 0) {
        if (!o->quiet)
            printf("'%s' is free: nobody to ask\n", nm);
        code = REVOKE_FREE;
    } else if (ans.listeners == 0) {
        if (!o->quiet)
            printf("'%s' is held (%d holder%s), but nobody listens for revoke requests: the "
                   "holder set no handler\n", nm, ans.holders, ans.holders == 1 ? "" : "s");
        code = REVOKE_UNHEARD;
    } else if (!o->quiet) {
        printf("asked the holder%s of '%s' to let it go\n", ans.holders == 1 ? "" : "s", nm);
    }
    dlock_lock_free(l);
    dlock_client_close(c);
    return code;
}
