/* Who holds a lock. An owner id is "<client uuid>:<n>", and every dlock
 * connection names itself dlock|<uuid>|<host>|<pid>|<label> (CLIENT
 * SETNAME). One CLIENT LIST maps each uuid to its host, pid, address and
 * label. A `dlock run` labels its client run:<unix ms acquired>: once it
 * holds the lock (a semaphore run's run:<ms>:#<permit id>:), and writes its
 * command in a note beside the lock (dlock_client_set_note), which only the
 * users who may read the lock read: CLIENT LIST, which any user allowed to
 * list reads, tells no command. (dlock before 0.3 put the command, '+' for
 * spaces and %XX for other bytes, after the label's last ':': still read.)
 * Redisson names no connection: a holder whose uuid no dlock connection
 * carries is "not a dlock client (Redisson or other)" - or a dlock that is
 * gone without releasing, whose hold lasts until its lease ends. */
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "cli.h"

typedef struct conn {
    char uuid[37];
    char *host, *pid, *addr, *label;
    int run;                                /* a dlock run's label */
    char permit[DLOCK_PERMIT_ID_BUFSIZE];   /* the permit a semaphore run names, or "" */
} conn;

struct holder_map {
    conn *v;          /* by uuid */
    size_t n;
    const conn **perm;/* the runs naming a permit, by permit id */
    size_t np;
    int ok;           /* CLIENT LIST was read */
    char err[200];
    dlock_client *c;  /* reads the runs' notes */
};

int64_t wall_ms(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

/* ------------------------------------------------------------- labels */

/* Bytes a shell word may hold without quotes. */
static int shell_plain(unsigned char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           strchr("-_./:=,+@%", ch) != NULL;
}

char *run_command_text(char **cmd)
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
    if (strlen(s) > DLOCK_NOTE_MAX)   /* cut (bytes: a code point may be cut; printed escaped) */
        memcpy(s + DLOCK_NOTE_MAX - 3, "...", 4);
    return s;
}

void run_label(int64_t acquired_ms, const char *permit, char *buf, size_t size)
{
    if (permit && *permit)
        snprintf(buf, size, "run:%lld:#%s:", (long long)acquired_ms, permit);
    else
        snprintf(buf, size, "run:%lld:", (long long)acquired_ms);
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

/* A run label's parts: 1 and *acquired, the permit id (permit[DLOCK_PERMIT_ID_BUFSIZE]
 * may be NULL; "" for a lock's run) and, from an older dlock's label, the
 * decoded command (malloc'd into *cmd when cmd is not NULL and the label
 * has one, else NULL). 0 when it is no run label. */
static int parse_run_label(const char *label, int64_t *acquired, char *permit, char **cmd)
{
    if (permit)
        permit[0] = '\0';
    if (cmd)
        *cmd = NULL;
    if (strncmp(label, "run:", 4) != 0)
        return 0;
    char *end;
    long long ms = strtoll(label + 4, &end, 10);
    if (*end != ':' || ms <= 0)
        return 0;
    *acquired = ms;
    const char *enc = end + 1;
    enc += label_permit(enc, permit);
    if (!cmd || !*enc || !(*cmd = malloc(strlen(enc) + 1)))
        return 1;
    size_t j = 0;
    for (const char *p = enc; *p; p++) {
        int a, b;
        if (*p == '%' && (a = hexv((unsigned char)p[1])) >= 0 && (b = hexv((unsigned char)p[2])) >= 0 &&
            (a | b)) {
            (*cmd)[j++] = (char)(a * 16 + b);
            p += 2;
        } else if (*p == '+') {
            (*cmd)[j++] = ' ';
        } else {
            (*cmd)[j++] = *p;
        }
    }
    (*cmd)[j] = '\0';
    return 1;
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

static void conn_clear(conn *c)
{
    free(c->host);
    free(c->pid);
    free(c->label);
    free(c->addr);
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
        conn_clear(c);
        return -1;
    }
    int64_t ms;
    c->run = parse_run_label(c->label, &ms, c->permit, NULL);
    return 0;
}

static int by_uuid(const void *a, const void *b)
{
    return memcmp(((const conn *)a)->uuid, ((const conn *)b)->uuid, 36);
}

static int by_permit(const void *a, const void *b)
{
    return strcmp((*(const conn *const *)a)->permit, (*(const conn *const *)b)->permit);
}

holder_map *holder_map_load(dlock_client *c)
{
    holder_map *m = calloc(1, sizeof(*m));
    if (!m)
        return NULL;
    m->c = c;
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
                    conn_clear(&cn);
                    break;
                }
                m->v = v;
            }
            m->v[m->n++] = cn;
            m->np += cn.permit[0] != '\0';
        }
        line += len;
        line += strspn(line, "\r\n");
    }
    free(text);
    if (m->n)
        qsort(m->v, m->n, sizeof(conn), by_uuid);
    if (m->np && (m->perm = malloc(m->np * sizeof(*m->perm)))) {
        size_t k = 0;
        for (size_t i = 0; i < m->n; i++)
            if (m->v[i].permit[0])
                m->perm[k++] = &m->v[i];
        qsort(m->perm, m->np, sizeof(*m->perm), by_permit);
    } else {
        m->np = 0;
    }
    return m;
}

void holder_map_free(holder_map *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->n; i++)
        conn_clear(&m->v[i]);
    free(m->v);
    free(m->perm);
    free(m);
}

/* The connection of the dlock run whose label names permit id `id`. */
static const conn *find_permit(const holder_map *m, const char *id)
{
    conn key;
    memset(&key, 0, sizeof(key));
    snprintf(key.permit, sizeof(key.permit), "%s", id);
    const conn *kp = &key;
    const conn **hit = m->np ? bsearch(&kp, m->perm, m->np, sizeof(*m->perm), by_permit) : NULL;
    return hit ? *hit : NULL;
}

/* The connection that says most about the owner's client: a run label first
 * (a client has several connections; the pub/sub one may keep an older
 * label), then any label, then any. NULL when none carries its uuid. An
 * owner that is a permit id (32 hex characters, no ':') is looked for in the
 * labels of semaphore runs. */
static const conn *find(const holder_map *m, const char *owner)
{
    if (!m || !m->ok || !owner || !m->n)
        return NULL;
    if (strlen(owner) == DLOCK_PERMIT_ID_BUFSIZE - 1 && !strchr(owner, ':'))
        return find_permit(m, owner);
    const char *colon = strrchr(owner, ':');
    if (!colon || colon - owner != 36)
        return NULL;
    /* The first connection of the uuid (the array is sorted by it). */
    size_t lo = 0, hi = m->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (memcmp(m->v[mid].uuid, owner, 36) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    const conn *best = NULL;
    int best_rank = -1;
    for (size_t i = lo; i < m->n && memcmp(m->v[i].uuid, owner, 36) == 0; i++) {
        int rank = m->v[i].run ? 2 : m->v[i].label[0] ? 1 : 0;
        if (rank > best_rank) {
            best = &m->v[i];
            best_rank = rank;
        }
    }
    return best;
}

int holder_lookup(const holder_map *m, const char *name, const char *owner, holder_info *out)
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
    out->run = parse_run_label(c->label, &out->acquired_ms, NULL, name ? &out->command : NULL);
    if (out->run)
        out->held_ms = wall_ms() - out->acquired_ms;
    /* The run's command: its note beside the lock (an older dlock's label
     * carried it). A note that cannot be read leaves it unknown. */
    char *note = NULL;
    if (out->run && name && m->c && dlock_client_note(m->c, name, owner, &note, NULL) == DLOCK_OK &&
        note) {
        free(out->command);
        out->command = note;
    }
    return 1;
}

void holder_info_free(holder_info *h) { free(h->command); }

const char *holder_map_error(const holder_map *m) { return m && !m->ok ? m->err : NULL; }

const char *holder_describe(const holder_map *m, const char *name, const char *owner, int brief,
                            char *buf, size_t size)
{
    return holder_describe_as(m, name, owner, brief, "dlock run", buf, size);
}

const char *holder_describe_as(const holder_map *m, const char *name, const char *owner,
                               int brief, const char *runner, char *buf, size_t size)
{
    holder_info h;
    int r = holder_lookup(m, name, owner, &h);
    char host[80], cmd[160], held[32], addr[80];
    if (r < 0) {
        buf[0] = '\0';
    } else if (r == 0) {
        snprintf(buf, size, brief ? "not dlock" : "not a dlock client (Redisson or other; or "
                                                  "one no longer connected)");
    } else {
        cli_esc(h.host, host, sizeof(host));
        cli_esc(h.addr, addr, sizeof(addr));
        cli_esc(h.command ? h.command : "", cmd, sizeof(cmd));
        cli_fmt_duration(h.held_ms < 0 ? 0 : h.held_ms, held, sizeof(held));
        if (h.run && brief)
            snprintf(buf, size, "%s:%ld%s%s%s %s", host, h.pid, h.command ? " [" : "", cmd,
                     h.command ? "]" : "", held);
        else if (h.run)
            snprintf(buf, size, "%s on %s, pid %ld (%s), for %s%s%s", runner, host, h.pid, addr,
                     held, h.command ? ": " : "", cmd);
        else if (brief)
            snprintf(buf, size, "%s:%ld", host, h.pid);
        else
            snprintf(buf, size, "dlock client on %s, pid %ld (%s)%s%s", host, h.pid, addr,
                     h.label[0] ? ", label " : "", h.label);
    }
    holder_info_free(&h);
    return buf;
}

void holder_json(FILE *f, const holder_map *m, const char *name, const char *owner)
{
    holder_info h;
    int r = holder_lookup(m, name, owner, &h);
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
        }
        if (h.run)
            fprintf(f, ",\"acquired_unix_ms\":%lld,\"held_ms\":%lld", (long long)h.acquired_ms,
                    (long long)(h.held_ms < 0 ? 0 : h.held_ms));
    }
    holder_info_free(&h);
}
