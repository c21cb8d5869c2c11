/* dlock leader NAME [--watch]: who leads election NAME (term, host, pid,
 * owner id), and with --watch each change as it comes (woken by the
 * election's messages), until interrupted. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static void show(const char *name, uint64_t term, const char *who)
{
    char nm[200];
    if (term)
        printf("%s: term %llu, %s\n", cli_esc(name, nm, sizeof(nm)), (unsigned long long)term,
               who);
    else
        printf("%s: no leader\n", cli_esc(name, nm, sizeof(nm)));
    fflush(stdout);
}

int cmd_leader(cli_opts *o, int argc, char **argv)
{
    const char *name = NULL;
    int watch = 0, r;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--watch") == 0 || strcmp(argv[i], "-w") == 0) {
            watch = 1;
        } else if ((r = cli_global_opt(o, argc, argv, &i)) != 0) {
            if (r < 0)
                return EXIT_USAGE;
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            cli_usage_error(o, "leader", "unknown option '%s'", argv[i]);
            return EXIT_USAGE;
        } else if (name) {
            cli_usage_error(o, "leader", "one election NAME");
            return EXIT_USAGE;
        } else {
            name = argv[i];
        }
    }
    if (!name) {
        cli_usage_error(o, "leader", "missing election NAME");
        return EXIT_USAGE;
    }
    dlock_client *c;
    o->label = "leader";
    int code = cli_open(o, &c, NULL, NULL);
    if (code)
        return code;
    dlock_election *e = NULL;
    int rc = dlock_election_get(c, name, &e);
    uint64_t term = 0;
    char who[600];
    if (rc == DLOCK_OK)
        rc = dlock_election_leader(e, &term, who, sizeof(who));
    if (rc == DLOCK_OK)
        show(name, term, who);
    while (rc == DLOCK_OK && watch) {
        rc = dlock_election_await_change(e, term, DLOCK_WAIT_FOREVER, NULL, &term, who,
                                         sizeof(who));
        if (rc == DLOCK_OK)
            show(name, term, who);
    }
    if (rc != DLOCK_OK)
        code = cli_fail(o, rc, "leader");
    dlock_election_free(e);
    dlock_client_close(c);
    return code;
}
