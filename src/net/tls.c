/* TLS on a transport (OpenSSL): one SSL_CTX per client, one SSL per
 * connection, over the connection's own non-blocking socket.
 *
 * The SSL reads and writes the socket through a small BIO of ours rather
 * than OpenSSL's socket BIO, which write()s: ours sends with MSG_NOSIGNAL, so
 * a server gone away is an error, never a SIGPIPE in the application.
 *
 * Failures are worded for the person who must fix them: which certificate
 * check failed, or that the other side does not speak TLS at all (a plain
 * port behind rediss://), or wants a client certificate. OpenSSL's error
 * queue is per thread: it is cleared before each call, so an old entry never
 * explains a new failure. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <arpa/inet.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "net/net.h"

struct dlock__tls {
    SSL_CTX *ctx;
    BIO_METHOD *bio;
    char *server_name;       /* SNI and the name verified; NULL: the endpoint's host */
    int verify;
};

/* ------------------------------------------------------------------ BIO */

static int bio_write(BIO *b, const char *buf, int n)
{
    dlock__transport *t = BIO_get_data(b);
    BIO_clear_retry_flags(b);
    ssize_t k;
    do
        k = send(t->fd, buf, (size_t)n, MSG_NOSIGNAL);
    while (k < 0 && errno == EINTR);
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        BIO_set_retry_write(b);
    return (int)k;
}

static int bio_read(BIO *b, char *buf, int n)
{
    dlock__transport *t = BIO_get_data(b);
    BIO_clear_retry_flags(b);
    ssize_t k;
    do
        k = recv(t->fd, buf, (size_t)n, 0);
    while (k < 0 && errno == EINTR);
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        BIO_set_retry_read(b);
    if (k == 0)
        t->eof = 1;
    return (int)k;
}

static int bio_puts(BIO *b, const char *s) { return bio_write(b, s, (int)strlen(s)); }

static long bio_ctrl(BIO *b, int cmd, long num, void *ptr)
{
    dlock__transport *t = BIO_get_data(b);
    switch (cmd) {
    case BIO_CTRL_FLUSH:
        return 1;
    case BIO_CTRL_EOF:
        return t && t->eof;
    default:
        return 0;
    }
}

static int bio_create(BIO *b)
{
    BIO_set_init(b, 1);
    return 1;
}

static int bio_destroy(BIO *b) { return 1; }

/* -------------------------------------------------------------- context */

/* The server asked for a client certificate and none is configured: noted,
 * so that the connection's failure can say so (over TLS 1.3 the refusal
 * comes after the client's handshake ended, and may be lost to the reset). */
static int no_client_cert(SSL *ssl, X509 **x509, EVP_PKEY **pkey)
{
    (void)x509;
    (void)pkey;
    BIO *b = SSL_get_rbio(ssl);
    dlock__transport *t = b ? BIO_get_data(b) : NULL;
    if (t)
        t->cert_asked = 1;
    return 0;
}

/* The first OpenSSL error of this thread's queue, as text. */
static const char *ssl_reason(char *buf, size_t size)
{
    unsigned long e = ERR_peek_last_error();
    if (!e)
        return "unknown error";
    const char *r = ERR_reason_error_string(e);
    if (r)
        snprintf(buf, size, "%s", r);
    else
        ERR_error_string_n(e, buf, size);
    return buf;
}

static int load_fail(const char *addr, const char *what, const char *file)
{
    char why[160];
    if (access(file, R_OK) != 0)
        snprintf(why, sizeof(why), "%s", strerror(errno));
    else
        ssl_reason(why, sizeof(why));
    ERR_clear_error();
    return dlock__fail(DLOCK_ETLS, "TLS for %s: cannot load the %s %s: %s", addr, what, file,
                       why);
}

int dlock__tls_new(dlock__tls **out, const dlock__tls_opts *o, const char *addr)
{
    *out = NULL;
    ERR_clear_error();
    dlock__tls *tls = calloc(1, sizeof(*tls));
    if (!tls)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    tls->verify = o->verify != 0;
    int rc = DLOCK_OK;
    if (dlock__dup_opt(&tls->server_name, o->server_name) != 0 ||
        !(tls->ctx = SSL_CTX_new(TLS_client_method())) ||
        !(tls->bio = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "dlock"))) {
        rc = dlock__fail(DLOCK_ENOMEM, "out of memory setting up TLS");
        goto fail;
    }
    BIO_meth_set_write(tls->bio, bio_write);
    BIO_meth_set_read(tls->bio, bio_read);
    BIO_meth_set_puts(tls->bio, bio_puts);
    BIO_meth_set_ctrl(tls->bio, bio_ctrl);
    BIO_meth_set_create(tls->bio, bio_create);
    BIO_meth_set_destroy(tls->bio, bio_destroy);
    SSL_CTX_set_min_proto_version(tls->ctx, TLS1_2_VERSION);
    /* A server that closes without close_notify ends the stream like EOF;
     * writes may resume from a buffer that grew or moved (aconn.c appends). */
    SSL_CTX_set_options(tls->ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
    SSL_CTX_set_mode(tls->ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    SSL_CTX_set_verify(tls->ctx, tls->verify ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, NULL);
    if (o->ca_file || o->ca_dir) {
        if (o->ca_file && access(o->ca_file, R_OK) != 0) {
            rc = load_fail(addr, "CA file", o->ca_file);
            goto fail;
        }
        if (o->ca_dir && access(o->ca_dir, R_OK | X_OK) != 0) {
            rc = load_fail(addr, "CA directory", o->ca_dir);
            goto fail;
        }
        if (SSL_CTX_load_verify_locations(tls->ctx, o->ca_file, o->ca_dir) != 1) {
            rc = load_fail(addr, o->ca_file ? "CA file" : "CA directory",
                           o->ca_file ? o->ca_file : o->ca_dir);
            goto fail;
        }
    } else if (tls->verify && SSL_CTX_set_default_verify_paths(tls->ctx) != 1) {
        rc = load_fail(addr, "system's CA store", "(default paths)");
        goto fail;
    }
    if (!o->cert_file)
        SSL_CTX_set_client_cert_cb(tls->ctx, no_client_cert);
    if (o->cert_file) {
        if (SSL_CTX_use_certificate_chain_file(tls->ctx, o->cert_file) != 1) {
            rc = load_fail(addr, "client certificate", o->cert_file);
            goto fail;
        }
        if (SSL_CTX_use_PrivateKey_file(tls->ctx, o->key_file, SSL_FILETYPE_PEM) != 1 &&
            ERR_GET_REASON(ERR_peek_last_error()) != X509_R_KEY_VALUES_MISMATCH) {
            rc = load_fail(addr, "client key", o->key_file);
            goto fail;
        }
        if (SSL_CTX_check_private_key(tls->ctx) != 1) {
            rc = dlock__fail(DLOCK_ETLS, "TLS for %s: the key %s does not match the certificate "
                                         "%s", addr, o->key_file, o->cert_file);
            ERR_clear_error();
            goto fail;
        }
    }
    *out = tls;
    return DLOCK_OK;
fail:
    dlock__tls_free(tls);
    return rc;
}

void dlock__tls_free(dlock__tls *tls)
{
    if (!tls)
        return;
    SSL_CTX_free(tls->ctx);
    if (tls->bio)
        BIO_meth_free(tls->bio);
    free(tls->server_name);
    free(tls);
}

/* ------------------------------------------------------------ transport */

/* Explains a failed SSL call in t->err; returns DLOCK__IO_AGAIN (t->want
 * set), 0 (the server closed the connection) or DLOCK__IO_ERR. */
static int ssl_error(dlock__transport *t, int ret, const char *during)
{
    SSL *ssl = t->ssl;
    int e = SSL_get_error(ssl, ret);
    switch (e) {
    case SSL_ERROR_WANT_READ:
        t->want = POLLIN;
        return DLOCK__IO_AGAIN;
    case SSL_ERROR_WANT_WRITE:
        t->want = POLLOUT;
        return DLOCK__IO_AGAIN;
    case SSL_ERROR_ZERO_RETURN:
        t->hung_up = 1;
        snprintf(t->err, sizeof(t->err), "connection closed by the server");
        return 0;
    case SSL_ERROR_SYSCALL:
        if (errno == 0 || t->eof) {
            t->hung_up = 1;
            snprintf(t->err, sizeof(t->err), "connection closed by the server");
            return 0;
        }
        return dlock__io_fail(t, errno, during);
    default:
        break;
    }
    t->tls_error = 1;
    char why[96];
    unsigned long err = ERR_peek_last_error();
    int reason = ERR_GET_REASON(err);
    long vr = SSL_get_verify_result(ssl);
    if (vr != X509_V_OK && ERR_GET_LIB(err) == ERR_LIB_SSL &&
        reason == SSL_R_CERTIFICATE_VERIFY_FAILED)
        snprintf(t->err, sizeof(t->err), "TLS: the server's certificate was refused: %s",
                 X509_verify_cert_error_string(vr));
    else if (reason == SSL_R_WRONG_VERSION_NUMBER || reason == SSL_R_PACKET_LENGTH_TOO_LONG ||
             reason == SSL_R_UNKNOWN_PROTOCOL || reason == SSL_R_HTTP_REQUEST)
        snprintf(t->err, sizeof(t->err),
                 "TLS: the server does not speak TLS (%s): a plain port? use redis://",
                 ssl_reason(why, sizeof(why)));
    else if (reason == SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED ||
             reason == SSL_R_SSLV3_ALERT_BAD_CERTIFICATE ||
             reason == SSL_R_TLSV1_ALERT_UNKNOWN_CA ||
             reason == SSL_R_SSLV3_ALERT_CERTIFICATE_UNKNOWN ||
             reason == SSL_R_SSLV3_ALERT_HANDSHAKE_FAILURE)
        snprintf(t->err, sizeof(t->err),
                 "TLS: the server refused the handshake (%s): does it want a client "
                 "certificate it trusts? (dlock_config_set_tls_cert, ?cert=&key=)",
                 ssl_reason(why, sizeof(why)));
    else
        snprintf(t->err, sizeof(t->err), "TLS %s failed: %s", during,
                 ssl_reason(why, sizeof(why)));
    ERR_clear_error();
    return DLOCK__IO_ERR;
}

static int tls_handshake(dlock__transport *t)
{
    ERR_clear_error();
    int ret = SSL_connect(t->ssl);
    if (ret == 1)
        return DLOCK_OK;
    int rc = ssl_error(t, ret, "handshake");
    if (rc == 0) {
        /* Closed in the middle of the handshake. */
        t->tls_error = 1;
        snprintf(t->err, sizeof(t->err), "TLS handshake failed: the server closed the "
                                         "connection (is it a TLS port?)");
        return DLOCK__IO_ERR;
    }
    return rc;
}

static ssize_t tls_read(dlock__transport *t, char *buf, size_t n)
{
    ERR_clear_error();
    int k = SSL_read(t->ssl, buf, n > INT32_MAX ? INT32_MAX : (int)n);
    return k > 0 ? k : ssl_error(t, k, "read");
}

static ssize_t tls_write(dlock__transport *t, const char *buf, size_t n)
{
    ERR_clear_error();
    int k = SSL_write(t->ssl, buf, n > INT32_MAX ? INT32_MAX : (int)n);
    if (k > 0)
        return k;
    int rc = ssl_error(t, k, "write");
    if (rc == 0) {
        t->hung_up = 1;
        snprintf(t->err, sizeof(t->err), "connection closed by the server");
        return DLOCK__IO_ERR;
    }
    return rc;
}

static int tls_pending(const dlock__transport *t) { return SSL_pending(t->ssl) > 0; }

static void tls_close(dlock__transport *t, int reset)
{
    if (!t->ssl)
        return;
    if (!reset && SSL_is_init_finished(t->ssl)) {
        ERR_clear_error();
        SSL_shutdown(t->ssl);   /* one try: a close_notify when it fits in the socket */
    }
    SSL_free(t->ssl);
    t->ssl = NULL;
    ERR_clear_error();
}

static const dlock__transport_vt tls_vt = {"tls", tls_handshake, tls_read, tls_write,
                                           tls_pending, tls_close};

static int is_ip(const char *host)
{
    unsigned char buf[sizeof(struct in6_addr)];
    return inet_pton(AF_INET, host, buf) == 1 || inet_pton(AF_INET6, host, buf) == 1;
}

int dlock__tls_attach(dlock__transport *t, dlock__tls *tls, const dlock__endpoint *ep)
{
    ERR_clear_error();
    SSL *ssl = SSL_new(tls->ctx);
    BIO *bio = ssl ? BIO_new(tls->bio) : NULL;
    if (!bio) {
        SSL_free(ssl);
        ERR_clear_error();
        snprintf(t->err, sizeof(t->err), "out of memory starting TLS");
        return DLOCK__IO_ERR;
    }
    BIO_set_data(bio, t);
    SSL_set_bio(ssl, bio, bio);
    const char *name = tls->server_name ? tls->server_name : ep->host;
    int ok = 1;
    if (name && !is_ip(name))
        ok = SSL_set_tlsext_host_name(ssl, name) == 1;
    if (ok && tls->verify && name) {
        if (is_ip(name))
            ok = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name) == 1;
        else
            ok = SSL_set1_host(ssl, name) == 1;
    }
    if (!ok) {
        SSL_free(ssl);
        ERR_clear_error();
        t->tls_error = 1;
        snprintf(t->err, sizeof(t->err), "TLS: cannot use server name '%s'", name);
        return DLOCK__IO_ERR;
    }
    SSL_set_connect_state(ssl);
    t->ssl = ssl;
    t->vt = &tls_vt;
    t->eof = 0;
    return DLOCK_OK;
}

