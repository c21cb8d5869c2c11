/* Who holds a lock. An owner id is "<client uuid>:<n>", and every dlock
 * connection names itself dlock|<uuid>|<host>|<pid>|<label> (CLIENT
 * SETNAME). One CLIENT LIST maps each uuid to its host, pid, address and
 * label. A `dlock run` labels its client run:<unix ms acquired>:<command>
 * once it holds the lock: the command as a shell would read it back, with
 * '+' for spaces and %XX for other bytes a label may not hold. Redisson names no connection: a holder whose uuid no dlock
 * connection carries is "not a dlock client (Redisson or other)" - or a dlock
 * that is gone without releasing, whose hold lasts until its lease ends. */
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "cli.h"

#define LABEL_MAX 128   /* the library's limit on a label */

typedef struct conn {
    char uuid[37];
    char *host, *pid, *addr, *label;
} conn;

struct holder_map {
    conn *v;
    size_t n;
    int ok;           /* CLIENT LIST was read */
    char err[200];
};

int64_t wall_ms(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

/* ------------------------------------------------------------- labels */

/* Bytes a label keeps as they are; ' ' is written '+', the rest %XX. */
static int plain(unsigned char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           strchr("-._~/=,@:'\"", ch) != NULL;
}

/* Bytes a shell word may hold without quotes. */
static int shell_plain(unsigned char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           strchr("-_./:=,+@%", ch) != NULL;
}

/* The command as a shell would take it back: words joined by spaces, quoted
 * with '...' when they need it. Malloc'd. */
static char *shell_join(char **cmd)
{
    size_t len = 1;
    for (size_t a = 0; cmd[a]; a++)
        len += strlen(cmd[a]) * 4 + 3;
    char *s = malloc(len), *p = s;
    if (!s)
        return NULL;
    for (size_t a = 0; cmd[a]; a++) {
        if (a)
            *p++ = ' ';
        int quote = !cmd[a][0];
        for (const char *c = cmd[a]; *c && !quote; c++)
            quote = !shell_plain((unsigned char)*c);
        if (quote)
            *p++ = '\'';
        for (const char *c = cmd[a]; *c; c++) {
            if (*c == '\'') {
                memcpy(p, "'\\''", 4);
                p += 4;
            } else {
                *p++ = *c;
            }
        }
        if (quote)
            *p++ = '\'';
    }
    *p = '\0';
    return s;
}

void run_label(char **cmd, int64_t acquired_ms, const char *permit, char *buf, size_t size)
{
    static const char hex[] = "0123456789ABCDEF";
    if (size > LABEL_MAX + 1)
        size = LABEL_MAX + 1;
    int n = permit && *permit ? snprintf(buf, size, "run:%lld:#%s:", (long long)acquired_ms,
                                         permit)
                              : snprintf(buf, size, "run:%lld:", (long long)acquired_ms);
    size_t j = n > 0 ? (size_t)n : 0;
    char *joined = shell_join(cmd);
    for (const unsigned char *p = (const unsigned char *)(joined ? joined : "?"); *p; p++) {
        size_t need = plain(*p) || *p == ' ' ? 1 : 3;
        if (j + need + 4 > size) {   /* keep room for "..." */
            memcpy(buf + j, "...", 4);
            free(joined);
            return;
        }
        if (*p == ' ') {
            buf[j++] = '+';
        } else if (plain(*p)) {
            buf[j++] = (char)*p;
        } else {
            buf[j++] = '%', buf[j++] = hex[*p >> 4], buf[j++] = hex[*p & 15];
        }
    }
    buf[j] = '\0';
    free(joined);
}

static int hexv(int ch)
{
    return ch >= '0' && ch <= '9' ? ch - '0'
           : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
           : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
                                    : -1;
}

/* "#<32 hex>:" at p: the permit id a semaphore run holds, into permit. */
static int label_permit(const char *p, char *permit)
{
    if (*p != '#')
        return 0;
    for (int i = 1; i <= DLOCK_PERMIT_ID_BUFSIZE - 1; i++)
        if (hexv((unsigned char)p[i]) < 0)
            return 0;
    if (p[DLOCK_PERMIT_ID_BUFSIZE] != ':')
        return 0;
    if (permit) {
        memcpy(permit, p + 1, DLOCK_PERMIT_ID_BUFSIZE - 1);
        permit[DLOCK_PERMIT_ID_BUFSIZE - 1] = '\0';
    }
    return DLOCK_PERMIT_ID_BUFSIZE + 1;
}

/* A run label's parts: *acquired, the permit id (permit[DLOCK_PERMIT_ID_BUFSIZE]
 * may be NULL; "" for a lock's run) and the decoded command (malloc'd). */
static char *parse_run_label(const char *label, int64_t *acquired, char *permit)
{
    if (permit)
        permit[0] = '\0';
    if (strncmp(label, "run:", 4) != 0)
        return NULL;
    char *end;
    long long ms = strtoll(label + 4, &end, 10);
    if (*end != ':' || ms <= 0)
        return NULL;
    const char *enc = end + 1;
    enc += label_permit(enc, permit);
    char *cmd = malloc(strlen(enc) + 1);
    if (!cmd)
        return NULL;
    size_t j = 0;
    for (const char *p = enc; *p; p++) {
        int a, b;
        if (*p == '%' && (a = hexv((unsigned char)p[1])) >= 0 && (b = hexv((unsigned char)p[2])) >= 0 &&
            (a | b)) {
            cmd[j++] = (char)(a * 16 + b);
            p += 2;
        } else if (*p == '+') {
            cmd[j++] = ' ';
        } else {
            cmd[j++] = *p;
        }
    }
    cmd[j] = '\0';
    *acquired = ms;
    return cmd;
}

/* -------------------------------------------------------------- the map */

/* The value of `key` (e.g. "addr=") in one CLIENT LIST line, up to a space. */
static char *field(const char *line, size_t len, const char *key)
{
    size_t kl = strlen(key);
    for (size_t i = 0; i + kl <= len; i++) {
        if ((i == 0 || line[i - 1] == ' ') && memcmp(line + i, key, kl) == 0) {
            size_t e = i + kl;
            while (e < len && line[e] != ' ')
                e++;
            char *v = malloc(e - i - kl + 1);
            if (v) {
                memcpy(v, line + i + kl, e - i - kl);
                v[e - i - kl] = '\0';
            }
            return v;
        }
    }
    return NULL;
}

/* name=dlock|<uuid>|<host>|<pid>|<label> into c; 0 when it is one. */
static int parse_conn(const char *line, size_t len, conn *c)
{
    memset(c, 0, sizeof(*c));
    char *name = field(line, len, "name=");
    if (!name || strncmp(name, "dlock|", 6) != 0 || strlen(name) < 6 + 36 + 1 ||
        name[42] != '|') {
        free(name);
        return -1;
    }
    memcpy(c->uuid, name + 6, 36);
    char *host = name + 43, *bar = strchr(host, '|');
    char *pid = bar ? bar + 1 : NULL, *bar2 = pid ? strchr(pid, '|') : NULL;
    if (!bar2) {
        free(name);
        return -1;
    }
    *bar = *bar2 = '\0';
    c->host = strdup(host);
    c->pid = strdup(pid);
    c->label = strdup(bar2 + 1);
    c->addr = field(line, len, "addr=");
    free(name);
    if (!c->host || !c->pid || !c->label || !c->addr) {
        free(c->host);
        free(c->pid);
        free(c->label);
        free(c->addr);
        return -1;
    }
    return 0;
}

holder_map *holder_map_load(dlock_client *c)
{
    holder_map *m = calloc(1, sizeof(*m));
    if (!m)
        return NULL;
    char *text = NULL;
    int rc = dlock_client_list_connections(c, &text);
    if (rc != DLOCK_OK) {
        cli_esc(dlock_last_error(), m->err, sizeof(m->err));
        return m;
    }
    m->ok = 1;
    size_t cap = 0;
    for (const char *line = text; *line;) {
        size_t len = strcspn(line, "\r\n");
        conn cn;
        if (parse_conn(line, len, &cn) == 0) {
            if (m->n == cap) {
                cap = cap ? cap * 2 : 16;
                conn *v = realloc(m->v, cap * sizeof(conn));
                if (!v) {
                    free(cn.host), free(cn.pid), free(cn.label), free(cn.addr);
                    break;
                }
                m->v = v;
            }
            m->v[m->n++] = cn;
        }
        line += len;
        line += strspn(line, "\r\n");
    }
    free(text);
    return m;
}

void holder_map_free(holder_map *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->n; i++) {
        free(m->v[i].host);
        free(m->v[i].pid);
        free(m->v[i].label);
        free(m->v[i].addr);
    }
    free(m->v);
    free(m);
}

/* The connection of the dlock run whose label names permit id `id`. */
static const conn *find_permit(const holder_map *m, const char *id)
{
    for (size_t i = 0; i < m->n; i++) {
        const char *l = m->v[i].label;
        char permit[DLOCK_PERMIT_ID_BUFSIZE];
        const char *colon = strncmp(l, "run:", 4) == 0 ? strchr(l + 4, ':') : NULL;
        if (colon && label_permit(colon + 1, permit) && strcmp(permit, id) == 0)
            return &m->v[i];
    }
    return NULL;
}

/* The connection that says most about the owner's client: a run label first
 * (a client has several connections; the pub/sub one may keep an older
 * label), then any label, then any. NULL when none carries its uuid. An
 * owner that is a permit id (32 hex characters, no ':') is looked for in the
 * labels of semaphore runs. */
static const conn *find(const holder_map *m, const char *owner)
{
    if (!m || !m->ok || !owner)
        return NULL;
    if (strlen(owner) == DLOCK_PERMIT_ID_BUFSIZE - 1 && !strchr(owner, ':'))
        return find_permit(m, owner);
    const char *colon = strrchr(owner, ':');
    if (!colon || colon - owner != 36)
        return NULL;
    const conn *best = NULL;
    int best_rank = -1;
    for (size_t i = 0; i < m->n; i++) {
        if (memcmp(m->v[i].uuid, owner, 36) != 0)
            continue;
        int rank = strncmp(m->v[i].label, "run:", 4) == 0 ? 2 : m->v[i].label[0] ? 1 : 0;
        if (rank > best_rank) {
            best = &m->v[i];
            best_rank = rank;
        }
    }
    return best;
}

int holder_lookup(const holder_map *m, const char *owner, holder_info *out)
{
    memset(out, 0, sizeof(*out));
    if (!m || !m->ok)
        return -1;
    const conn *c = find(m, owner);
    if (!c)
        return 0;
    out->dlock = 1;
    out->host = c->host;
    out->pid = atol(c->pid);
    out->addr = c->addr;
    out->label = c->label;
    out->command = parse_run_label(c->label, &out->acquired_ms, NULL);
    if (out->command)
        out->held_ms = wall_ms() - out->acquired_ms;
    return 1;
}

void holder_info_free(holder_info *h) { free(h->command); }

const char *holder_map_error(const holder_map *m) { return m && !m->ok ? m->err : NULL; }

const char *holder_describe(const holder_map *m, const char *owner, int brief, char *buf,
                            size_t size)
{
    return holder_describe_as(m, owner, brief, "dlock run", buf, size);
}

const char *holder_describe_as(const holder_map *m, const char *owner, int brief,
                               const char *runner, char *buf, size_t size)
{
    holder_info h;
    int r = holder_lookup(m, owner, &h);
    char host[80], cmd[160], held[32], addr[80];
    if (r < 0) {
        buf[0] = '\0';
    } else if (r == 0) {
        snprintf(buf, size, brief ? "not dlock" : "not a dlock client (Redisson or other; or "
                                                  "one no longer connected)");
    } else {
        cli_esc(h.host, host, sizeof(host));
        cli_esc(h.addr, addr, sizeof(addr));
        if (h.command) {
            cli_esc(h.command, cmd, sizeof(cmd));
            cli_fmt_duration(h.held_ms < 0 ? 0 : h.held_ms, held, sizeof(held));
            if (brief)
                snprintf(buf, size, "%s:%ld [%s] %s", host, h.pid, cmd, held);
            else
                snprintf(buf, size, "%s on %s, pid %ld (%s), for %s: %s", runner, host, h.pid,
                         addr, held, cmd);
        } else if (brief) {
            snprintf(buf, size, "%s:%ld", host, h.pid);
        } else {
            snprintf(buf, size, "dlock client on %s, pid %ld (%s)%s%s", host, h.pid, addr,
                     h.label[0] ? ", label " : "", h.label);
        }
    }
    holder_info_free(&h);
    return buf;
}

void holder_json(FILE *f, const holder_map *m, const char *owner)
{
    holder_info h;
    int r = holder_lookup(m, owner, &h);
    if (r == 0) {
        fputs(",\"client\":\"other\"", f);
    } else if (r > 0) {
        fputs(",\"client\":\"dlock\",", f);
        cli_json_field(f, "host", h.host);
        fprintf(f, ",\"pid\":%ld,", h.pid);
        cli_json_field(f, "addr", h.addr);
        fputc(',', f);
        cli_json_field(f, "label", h.label);
        if (h.command) {
            fputc(',', f);
            cli_json_field(f, "command", h.command);
            fprintf(f, ",\"acquired_unix_ms\":%lld,\"held_ms\":%lld", (long long)h.acquired_ms,
                    (long long)(h.held_ms < 0 ? 0 : h.held_ms));
        }
    }
    holder_info_free(&h);
}
