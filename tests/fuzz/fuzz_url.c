/* libFuzzer target: the URL and option parsers, and the dlock command's
 * duration parser and JSON string writer. Any input must give a clear code and
 * leave nothing allocated; a URL that parses must describe itself without its
 * password; the escaper never lets a control byte through. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "sync/sync.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s)
        return 0;
    memcpy(s, data, size);
    s[size] = '\0';

    dlock__endpoint ep;
    memset(&ep, 0, sizeof(ep));
    int rc = dlock__parse_url(s, &ep);
    if (rc == DLOCK_OK) {
        /* The printable address is exactly host:port, [host]:port or unix:path:
         * no room for credentials. */
        char buf[600], want[600];
        dlock__endpoint_str(&ep, buf, sizeof(buf));
        if (ep.path)
            snprintf(want, sizeof(want), "unix:%s", ep.path);
        else if (strchr(ep.host, ':'))
            snprintf(want, sizeof(want), "[%s]:%d", ep.host, ep.port);
        else
            snprintf(want, sizeof(want), "%s:%d", ep.host, ep.port);
        if (strcmp(buf, want) != 0 || (ep.port < 1 && !ep.path) || ep.port > 65535)
            abort();
        if ((ep.host == NULL) == (ep.path == NULL))
            abort();   /* exactly one of host and socket path */
        dlock__endpoint_clear(&ep);
    } else if (rc != DLOCK_EINVAL && rc != DLOCK_ENOMEM) {
        abort();
    }

    /* Deployment URLs: a list of valid seeds, a master name for a sentinel. */
    dlock__deploy d;
    memset(&d, 0, sizeof(d));
    memset(&ep, 0, sizeof(ep));
    if (dlock__is_deploy_url(s) && dlock__parse_deploy_url(s, &ep, &d, NULL) == DLOCK_OK) {
        if (d.nseeds < 1 || !ep.host || (d.kind == DLOCK__DEPLOY_SENTINEL) != (d.master != NULL) ||
            (d.master && !*d.master))
            abort();
        for (size_t i = 0; i < d.nseeds; i++)
            if (!d.seeds[i].host || d.seeds[i].port < 1 || d.seeds[i].port > 65535 ||
                d.seeds[i].db != 0 || d.seeds[i].user || d.seeds[i].pass)
                abort();
    }
    dlock__deploy_clear(&d);
    dlock__endpoint_clear(&ep);

    dlock_config *cfg = dlock_config_new();
    if (cfg) {
        dlock_config_set_url(cfg, s);
        dlock_config_set_client_name(cfg, s);
        dlock_config_free(cfg);
    }

    int64_t ms;
    if (cli_parse_duration(s, &ms) == 0 && ms < 0)
        abort();
    FILE *f = fopen("/dev/null", "w");
    if (f) {
        cli_json_string(f, s);
        cli_json_field(f, "name", s);
        fclose(f);
    }
    /* What the terminal is shown holds no control byte and no ESC. */
    char *e = cli_escape(s);
    for (const unsigned char *p = (const unsigned char *)e; e && *p; p++)
        if (*p < 0x20 || *p == 0x7f)
            abort();
    free(e);
    char small[24];
    cli_esc(s, small, sizeof(small));
    if (strlen(small) >= sizeof(small))
        abort();
    free(s);
    return 0;
}
