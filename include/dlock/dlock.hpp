/*
 * dlock for C++: RAII types over the C API of dlock.h, header-only (C++17 or
 * later; link with dlock as a C program does: dlock::dlock, or pkg-config dlock).
 *
 *   dlock::client c("redis://127.0.0.1:6379");
 *   dlock::mutex m(c, "orders:42");            // Redisson's RLock "orders:42"
 *   {
 *       std::unique_lock<dlock::mutex> g(m);   // lock(): waits, watchdog lease
 *       ...                                    // held; released at scope end
 *   }
 *   if (std::unique_lock<dlock::mutex> g(m, std::chrono::seconds(2)); g) ...
 *   dlock::semaphore s(c, "pool");            // Redisson's RSemaphore
 *   s.acquire(); ...; s.release();
 *
 * The types
 *   client            an open dlock_client (closed when the client and every
 *                     handle made from it are gone: handles share it)
 *   mutex, fair_mutex, fenced_mutex
 *                     Redisson's RLock, RFairLock, RFencedLock; Lockable and
 *                     TimedLockable: std::lock_guard, std::unique_lock,
 *                     std::scoped_lock, std::lock work
 *   shared_mutex      Redisson's RReadWriteLock, also SharedTimedLockable:
 *                     std::shared_lock takes the read side, std::unique_lock
 *                     the write side
 *   semaphore         as std::counting_semaphore: acquire, try_acquire,
 *                     try_acquire_for, try_acquire_until, release(n = 1)
 *   permit_semaphore  named, leased permits (acquire gives the permit's id)
 *   latch             as std::latch: count_down, try_wait, wait (and wait_for)
 * Every type is move-only; the destructor frees the C handle (a lock handle's
 * holds stay held, as with dlock_lock_free: use a guard to release them).
 * native_handle() gives the C object for the calls not wrapped here.
 *
 * Errors. A call that fails throws dlock::error, a std::system_error whose
 * code() is the dlock status in dlock::category() (code().value() is the
 * negative dlock_status; status() gives it typed) and whose what() is
 * dlock_last_error()'s detailed message (then, as std::system_error words
 * it, ": " and dlock_strerror()). The calls of the hot path also have a
 * non-throwing overload taking a std::error_code& last (the std::filesystem
 * convention): lock, try_lock, try_lock_for, try_lock_until, unlock; the
 * semaphore's acquire, try_acquire*, release; the permit semaphore's
 * release; client::ping. It sets the code (cleared on success;
 * dlock_last_error() still holds the detail on the calling thread) and
 * returns false on failure. The other calls (queries, setup) throw, and
 * native_handle() reaches their C form, which returns the status. Constructors throw;
 * client::open(url, ec) is the non-throwing way to connect. A std::error_code
 * compares equal to the dlock_status enumerators (ec == DLOCK_ETIMEDOUT) and
 * to std::errc where one fits (timed_out, operation_canceled,
 * operation_not_permitted for DLOCK_ENOTOWNER, invalid_argument, ...).
 *   A wait that ends without the lock or permit (try_lock, try_lock_for, ...,
 *   try_acquire_*, latch::wait_for) is an answer, not an error: it returns
 *   false (and an error_code overload leaves the code clear).
 *   unlock() never throws, as the standard's BasicLockable asks (guards call
 *   it from destructors, where a throw would end the program); a release
 *   that fails (the lease ran out, the lock was lost, Redis unreachable) is
 *   reported by unlock(ec) and by release(), which throws (DLOCK_ENOTOWNER
 *   for a lock the caller does not hold: Redisson's
 *   IllegalMonitorStateException). A watchdog hold found gone is also
 *   reported to the lost callback (dlock_config_set_lost_callback).
 *
 * Threads and owners. A client and its handles may be used from any number of
 * threads at once, as in C; moving, assigning or destroying an object must be
 * the last call on it. A lock's owner is the calling OS thread (Redisson's
 * convention), so the thread that locks must be the one that unlocks; a
 * handle made with an explicit owner (dlock::owner{client.new_owner_id()},
 * dlock_lock_get_as) acts for that owner from whichever thread calls, for
 * work that moves between threads. Locks are reentrant per owner, as
 * Redisson's are: std::mutex's "lock twice deadlocks" does not apply.
 *
 * Durations are std::chrono durations, rounded up to milliseconds;
 * try_*_until takes any clock's time point and waits until then, measured
 * once when the call starts (the wait itself runs on dlock's monotonic clock).
 */
#ifndef DLOCK_DLOCK_HPP
#define DLOCK_DLOCK_HPP

#if !defined(__cplusplus) || __cplusplus < 201703L
#error "dlock.hpp needs C++17 or later"
#endif

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <system_error>
#include <utility>

#include <dlock/dlock.h>

namespace dlock {

/* ----------------------------------------------------------------- errors */

/* The error category of dlock statuses: message() is dlock_strerror(). */
class error_category_impl final : public std::error_category {
  public:
    const char *name() const noexcept override { return "dlock"; }
    std::string message(int code) const override { return dlock_strerror(code); }
    std::error_condition default_error_condition(int code) const noexcept override {
        switch (code) {
        case DLOCK_EINVAL: return std::errc::invalid_argument;
        case DLOCK_ENOMEM: return std::errc::not_enough_memory;
        case DLOCK_ETIMEDOUT: return std::errc::timed_out;
        case DLOCK_ENOTOWNER: return std::errc::operation_not_permitted;
        case DLOCK_ECANCELED: return std::errc::operation_canceled;
        case DLOCK_ECONN: return std::errc::connection_refused;
        case DLOCK_ENAMETOOLONG: return std::errc::filename_too_long;
        case DLOCK_EDEADLK: return std::errc::resource_deadlock_would_occur;
        default: return std::error_condition(code, *this);
        }
    }
};

/* The one instance of the category (std::error_code compares categories by
 * address). */
inline const std::error_category &category() noexcept {
    static const error_category_impl cat;
    return cat;
}

inline std::error_code make_error_code(dlock_status s) noexcept {
    return std::error_code(static_cast<int>(s), category());
}

/* What every throwing call throws: the dlock status and the detailed message
 * of the failed call (dlock_last_error() at the time). */
class error : public std::system_error {
  public:
    error(int status, const char *message)
        : std::system_error(status, category(), message ? message : "") {}
    explicit error(int status) : error(status, dlock_last_error()) {}
    dlock_status status() const noexcept { return static_cast<dlock_status>(code().value()); }
};

namespace detail {
// DLOCK_WATCHDOG and DLOCK_WAIT_FOREVER, without their C casts (which
// -Wold-style-cast would flag in a user's build).
constexpr int64_t watchdog_ms = 0;
constexpr int64_t forever_ms = -1;

inline void check(int rc) {
    if (rc != DLOCK_OK)
        throw error(rc);
}
// Sets ec from rc; true on DLOCK_OK.
inline bool set(std::error_code &ec, int rc) noexcept {
    if (rc == DLOCK_OK)
        ec.clear();
    else
        ec.assign(rc, category());
    return rc == DLOCK_OK;
}
template <class Rep, class Period>
int64_t to_ms(const std::chrono::duration<Rep, Period> &d) {
    auto ms = std::chrono::ceil<std::chrono::milliseconds>(d).count();
    return ms < 0 ? 0 : static_cast<int64_t>(ms);
}
template <class Clock, class Duration>
int64_t until_ms(const std::chrono::time_point<Clock, Duration> &t) {
    return to_ms(t - Clock::now());
}
}  // namespace detail

/* ----------------------------------------------------------------- config */

/* A dlock_config (every option at its default; see dlock_config_new). The
 * setters return *this and throw dlock::error on a bad value; for the options
 * not wrapped here call the C setter on native_handle(). Not thread-safe,
 * as in C: build it in one thread. */
class config {
  public:
    config() : cfg_(dlock_config_new(), &dlock_config_free) {
        if (!cfg_)
            throw error(DLOCK_ENOMEM, "out of memory");
    }
    explicit config(const std::string &url) : config() { this->url(url); }

    config &url(const std::string &u) { return set(dlock_config_set_url(get(), u.c_str())); }
    config &watchdog_timeout(std::chrono::milliseconds d) {
        return set(dlock_config_set_watchdog_timeout(get(), d.count()));
    }
    config &command_timeout(std::chrono::milliseconds d) {
        return set(dlock_config_set_command_timeout(get(), d.count()));
    }
    config &connect_timeout(std::chrono::milliseconds d) {
        return set(dlock_config_set_connect_timeout(get(), d.count()));
    }
    config &client_name(const std::string &n) {
        return set(dlock_config_set_client_name(get(), n.c_str()));
    }
    config &lost_callback(dlock_lost_fn fn, void *ud) {
        return set(dlock_config_set_lost_callback(get(), fn, ud));
    }

    dlock_config *native_handle() const noexcept { return cfg_.get(); }

  private:
    dlock_config *get() const noexcept { return cfg_.get(); }
    config &set(int rc) {
        detail::check(rc);
        return *this;
    }
    std::unique_ptr<dlock_config, void (*)(dlock_config *)> cfg_;
};

/* ----------------------------------------------------------------- client */

/* An explicit owner id for a handle (see dlock_lock_get_as): the handle acts
 * for it from any thread. Usually client::new_owner_id(). */
struct owner {
    std::string id;
};

/* An open client (dlock_client_open): connects in the constructor, closes
 * (dlock_client_close) when it and every handle made from it are destroyed.
 * Move-only; a moved-from client is empty (native_handle() == nullptr) and
 * may only be destroyed or assigned. Any thread may use it at once. */
class client {
  public:
    explicit client(const config &cfg) { detail::check(open_into(cfg, c_)); }
    explicit client(const std::string &url) : client(config(url)) {}
    explicit client(const char *url) : client(config(url)) {}

    /* The non-throwing form: an empty client (!c) with ec set on failure. */
    static client open(const config &cfg, std::error_code &ec) noexcept {
        client c;
        detail::set(ec, open_into(cfg, c.c_));
        return c;
    }
    static client open(const std::string &url, std::error_code &ec) noexcept {
        try {
            config cfg;
            if (!detail::set(ec, dlock_config_set_url(cfg.native_handle(), url.c_str())))
                return client();
            return open(cfg, ec);
        } catch (const error &e) {
            ec = e.code();
            return client();
        } catch (...) {
            ec = dlock::make_error_code(DLOCK_ENOMEM);
            return client();
        }
    }

    client(client &&) noexcept = default;
    client &operator=(client &&) noexcept = default;
    client(const client &) = delete;
    client &operator=(const client &) = delete;
    ~client() = default;

    explicit operator bool() const noexcept { return c_ != nullptr; }
    dlock_client *native_handle() const noexcept { return c_.get(); }

    /* The client's UUID, the first half of its owner ids. */
    std::string id() const { return dlock_client_id(c_.get()); }
    /* The calling thread's owner id, "<uuid>:<thread id>". */
    std::string owner_id() const {
        char buf[DLOCK_OWNER_BUFSIZE];
        detail::check(dlock_client_owner_id(c_.get(), buf, sizeof buf));
        return buf;
    }
    /* A fresh owner id no thread uses, for dlock::owner. */
    std::string new_owner_id() const {
        char buf[DLOCK_OWNER_BUFSIZE];
        detail::check(dlock_client_new_owner_id(c_.get(), buf, sizeof buf));
        return buf;
    }
    /* One PING round trip. */
    void ping() const { detail::check(dlock_client_ping(c_.get())); }
    bool ping(std::error_code &ec) const noexcept {
        return detail::set(ec, dlock_client_ping(c_.get()));
    }

    /* The shared pointer the handles keep (the client closes after the last). */
    const std::shared_ptr<dlock_client> &shared() const noexcept { return c_; }

  private:
    client() = default;
    static int open_into(const config &cfg, std::shared_ptr<dlock_client> &out) noexcept {
        dlock_client *c = nullptr;
        int rc = dlock_client_open(&c, cfg.native_handle());
        if (rc != DLOCK_OK)
            return rc;
        try {
            out.reset(c, &dlock_client_close);   // closes c itself when this throws
        } catch (...) {
            return DLOCK_ENOMEM;
        }
        return DLOCK_OK;
    }
    std::shared_ptr<dlock_client> c_;
};

/* The lease of a lock's holds: DLOCK_WATCHDOG (held while the client lives,
 * renewed by its watchdog; the default), or a fixed time after which the
 * hold expires by itself. */
inline constexpr std::chrono::milliseconds watchdog{detail::watchdog_ms};

namespace detail {
// A C handle and the client it came from (kept alive: the client closes last).
template <class T, void (*Free)(T *)>
class handle {
  public:
    handle() = default;
    handle(std::shared_ptr<dlock_client> c, T *h) noexcept : c_(std::move(c)), h_(h) {}
    handle(handle &&o) noexcept : c_(std::move(o.c_)), h_(std::exchange(o.h_, nullptr)) {}
    handle &operator=(handle &&o) noexcept {
        if (this != &o) {
            reset();
            c_ = std::move(o.c_);
            h_ = std::exchange(o.h_, nullptr);
        }
        return *this;
    }
    handle(const handle &) = delete;
    handle &operator=(const handle &) = delete;
    ~handle() { reset(); }
    T *get() const noexcept { return h_; }
    void reset() noexcept {
        if (h_)
            Free(h_);
        h_ = nullptr;
        c_.reset();   // after the handle: the client may close now
    }

  private:
    std::shared_ptr<dlock_client> c_;
    T *h_ = nullptr;
};

template <class T, void (*Free)(T *), class Get>
handle<T, Free> make(const client &c, Get get) {
    T *h = nullptr;
    check(get(c.native_handle(), &h));
    return handle<T, Free>(c.shared(), h);
}
}  // namespace detail

/* ------------------------------------------------------------------- locks */

/* What mutex, fair_mutex, fenced_mutex and the sides of shared_mutex share:
 * one dlock_lock handle and the lease its acquisitions take. Lockable and
 * TimedLockable. */
class basic_mutex {
  public:
    /* Takes the lock, waiting as long as it takes (Redisson's lock(lease)). */
    void lock() { detail::check(dlock_lock_acquire(get(), lease_ms_)); }
    bool lock(std::error_code &ec) noexcept {
        return detail::set(ec, dlock_lock_acquire(get(), lease_ms_));
    }

    /* One attempt: true when taken, false when held by another owner. */
    bool try_lock() { return attempt(0); }
    bool try_lock(std::error_code &ec) noexcept { return attempt(0, ec); }

    /* Waits up to d (Redisson's tryLock(wait, lease)): false when still
     * held elsewhere then. */
    template <class Rep, class Period>
    bool try_lock_for(const std::chrono::duration<Rep, Period> &d) {
        return attempt(detail::to_ms(d));
    }
    template <class Rep, class Period>
    bool try_lock_for(const std::chrono::duration<Rep, Period> &d, std::error_code &ec) noexcept {
        return attempt(detail::to_ms(d), ec);
    }
    template <class Clock, class Duration>
    bool try_lock_until(const std::chrono::time_point<Clock, Duration> &t) {
        return attempt(detail::until_ms(t));
    }
    template <class Clock, class Duration>
    bool try_lock_until(const std::chrono::time_point<Clock, Duration> &t,
                        std::error_code &ec) noexcept {
        return attempt(detail::until_ms(t), ec);
    }

    /* Releases one hold; never throws (see the top of this file): a failure
     * is lost here, use unlock(ec) or release() to see it. */
    void unlock() noexcept { (void)dlock_lock_release(get()); }
    bool unlock(std::error_code &ec) noexcept { return detail::set(ec, dlock_lock_release(get())); }
    /* Releases one hold and throws on failure: DLOCK_ENOTOWNER when the
     * caller holds nothing (never held, released, expired, lost). */
    void release() { detail::check(dlock_lock_release(get())); }

    /* Takes the lock with a fencing token (waiting up to wait, or forever by
     * default) and returns the token; 0 when the wait ended first. */
    uint64_t lock_fenced(std::chrono::milliseconds wait = std::chrono::milliseconds(-1)) {
        dlock_wait_opts o{};
        uint64_t token = 0;
        o.wait_ms = wait.count() < 0 ? detail::forever_ms : wait.count();
        o.lease_ms = lease_ms_;
        o.token = &token;
        int rc = dlock_lock_acquire_opts(get(), &o);
        if (rc == DLOCK_ETIMEDOUT)
            return 0;
        detail::check(rc);
        return token;
    }

    /* Deletes the lock whoever holds it (Redisson's forceUnlock); true when
     * something was deleted. */
    bool force_unlock() {
        int was = 0;
        detail::check(dlock_lock_force_release(get(), &was));
        return was != 0;
    }
    /* Whether any owner holds it; whether this handle's owner does; its
     * hold count; the lock's TTL (-2 absent, -1 none). */
    bool is_locked() const { return flag(&dlock_lock_is_locked); }
    bool is_held() const { return flag(&dlock_lock_is_held); }
    int64_t hold_count() const {
        int64_t n = 0;
        detail::check(dlock_lock_hold_count(get(), &n));
        return n;
    }
    std::chrono::milliseconds ttl() const {
        int64_t t = 0;
        detail::check(dlock_lock_ttl(get(), &t));
        return std::chrono::milliseconds(t);
    }
    /* The last fencing token given for the name (Redisson's getToken). */
    uint64_t token() const {
        uint64_t t = 0;
        detail::check(dlock_lock_get_token(get(), &t));
        return t;
    }

    std::string name() const { return dlock_lock_name(get()); }
    std::chrono::milliseconds lease() const noexcept { return std::chrono::milliseconds(lease_ms_); }
    dlock_lock *native_handle() const noexcept { return h_.get(); }
    explicit operator bool() const noexcept { return h_.get() != nullptr; }

  protected:
    using handle_t = detail::handle<dlock_lock, &dlock_lock_free>;
    basic_mutex() = default;
    basic_mutex(handle_t h, std::chrono::milliseconds lease) : h_(std::move(h)), lease_ms_(lease.count()) {
        if (lease_ms_ < 0)
            throw error(DLOCK_EINVAL, "lease: negative (dlock::watchdog or a positive lease)");
    }
    // get(c, name, out) or get_as(c, name, owner, out), as the owner asks.
    template <class Get, class GetAs>
    static handle_t make(const client &c, const std::string &name, const owner *o, Get g, GetAs ga) {
        return detail::make<dlock_lock, &dlock_lock_free>(c, [&](dlock_client *cc, dlock_lock **out) {
            return o ? ga(cc, name.c_str(), o->id.c_str(), out) : g(cc, name.c_str(), out);
        });
    }

  private:
    dlock_lock *get() const noexcept { return h_.get(); }
    bool attempt(int64_t wait_ms) {
        int rc = dlock_lock_try(get(), wait_ms, lease_ms_);
        if (rc == DLOCK_ETIMEDOUT)
            return false;
        detail::check(rc);
        return true;
    }
    bool attempt(int64_t wait_ms, std::error_code &ec) noexcept {
        int rc = dlock_lock_try(get(), wait_ms, lease_ms_);
        detail::set(ec, rc == DLOCK_ETIMEDOUT ? DLOCK_OK : rc);
        return rc == DLOCK_OK;
    }
    bool flag(int (*fn)(dlock_lock *, int *)) const {
        int v = 0;
        detail::check(fn(get(), &v));
        return v != 0;
    }

    handle_t h_;
    int64_t lease_ms_ = detail::watchdog_ms;
};

/* A reentrant lock, Redisson's RLock (dlock_lock_get; dlock_lock_get_as with
 * an owner). lease: dlock::watchdog (the default) or a fixed lease for every
 * acquisition through this object. */
class mutex : public basic_mutex {
  public:
    mutex(const client &c, const std::string &name, std::chrono::milliseconds lease = watchdog)
        : basic_mutex(make(c, name, nullptr, &dlock_lock_get, &dlock_lock_get_as), lease) {}
    mutex(const client &c, const std::string &name, const owner &o,
         std::chrono::milliseconds lease = watchdog)
        : basic_mutex(make(c, name, &o, &dlock_lock_get, &dlock_lock_get_as), lease) {}
};

/* A fair lock, Redisson's RFairLock (dlock_fair_lock_get): waiters take turns
 * in arrival order across processes. */
class fair_mutex : public basic_mutex {
  public:
    fair_mutex(const client &c, const std::string &name, std::chrono::milliseconds lease = watchdog)
        : basic_mutex(make(c, name, nullptr, &dlock_fair_lock_get, &dlock_fair_lock_get_as), lease) {}
    fair_mutex(const client &c, const std::string &name, const owner &o,
              std::chrono::milliseconds lease = watchdog)
        : basic_mutex(make(c, name, &o, &dlock_fair_lock_get, &dlock_fair_lock_get_as), lease) {}
};

/* A fenced lock, Redisson's RFencedLock (dlock_fenced_lock_get): every
 * acquisition raises the fencing token; read it with token() while held. */
class fenced_mutex : public basic_mutex {
  public:
    fenced_mutex(const client &c, const std::string &name, std::chrono::milliseconds lease = watchdog)
        : basic_mutex(make(c, name, nullptr, &dlock_fenced_lock_get, &dlock_fenced_lock_get_as),
                     lease) {}
    fenced_mutex(const client &c, const std::string &name, const owner &o,
                std::chrono::milliseconds lease = watchdog)
        : basic_mutex(make(c, name, &o, &dlock_fenced_lock_get, &dlock_fenced_lock_get_as), lease) {}
};

/* A read-write lock, Redisson's RReadWriteLock: read() and write() are its two
 * sides, each a basic_mutex. The object itself is SharedTimedLockable, like
 * std::shared_timed_mutex: lock()/try_lock*()/unlock() take the write side,
 * lock_shared()/try_lock_shared*()/unlock_shared() the read side, so
 * std::unique_lock and std::shared_lock work. A reader asking for the write
 * side gets DLOCK_EDEADLK (dlock_write_lock_get). */
class shared_mutex {
  public:
    shared_mutex(const client &c, const std::string &name,
                    std::chrono::milliseconds lease = watchdog)
        : r_(c, name, nullptr, lease, true), w_(c, name, nullptr, lease, false) {}
    shared_mutex(const client &c, const std::string &name, const owner &o,
                    std::chrono::milliseconds lease = watchdog)
        : r_(c, name, &o, lease, true), w_(c, name, &o, lease, false) {}

    basic_mutex &read() noexcept { return r_; }
    basic_mutex &write() noexcept { return w_; }

    void lock() { w_.lock(); }
    bool try_lock() { return w_.try_lock(); }
    template <class Rep, class Period>
    bool try_lock_for(const std::chrono::duration<Rep, Period> &d) { return w_.try_lock_for(d); }
    template <class Clock, class Duration>
    bool try_lock_until(const std::chrono::time_point<Clock, Duration> &t) {
        return w_.try_lock_until(t);
    }
    void unlock() noexcept { w_.unlock(); }

    void lock_shared() { r_.lock(); }
    bool try_lock_shared() { return r_.try_lock(); }
    template <class Rep, class Period>
    bool try_lock_shared_for(const std::chrono::duration<Rep, Period> &d) {
        return r_.try_lock_for(d);
    }
    template <class Clock, class Duration>
    bool try_lock_shared_until(const std::chrono::time_point<Clock, Duration> &t) {
        return r_.try_lock_until(t);
    }
    void unlock_shared() noexcept { r_.unlock(); }

  private:
    class side : public basic_mutex {
      public:
        side(const client &c, const std::string &name, const owner *o,
             std::chrono::milliseconds lease, bool read)
            : basic_mutex(read ? make(c, name, o, &dlock_read_lock_get, &dlock_read_lock_get_as)
                              : make(c, name, o, &dlock_write_lock_get, &dlock_write_lock_get_as),
                         lease) {}
    };
    side r_, w_;
};

/* -------------------------------------------------------------- semaphores */

/* A counting semaphore, Redisson's RSemaphore (dlock_semaphore_get), used as
 * std::counting_semaphore is. Permits belong to nobody: any thread or process
 * may release them. Set the count first (try_set_permits or set_permits): a
 * semaphore that does not exist has no permits. */
class semaphore {
  public:
    semaphore(const client &c, const std::string &name)
        : h_(detail::make<dlock_semaphore, &dlock_semaphore_free>(
              c, [&](dlock_client *cc, dlock_semaphore **out) {
                  return dlock_semaphore_get(cc, name.c_str(), out);
              })) {}

    /* Takes n permits, waiting as long as it takes. */
    void acquire(std::ptrdiff_t n = 1) { detail::check(dlock_semaphore_acquire(get(), n)); }
    bool acquire(std::ptrdiff_t n, std::error_code &ec) noexcept {
        return detail::set(ec, dlock_semaphore_acquire(get(), n));
    }
    /* One try for n permits: false when fewer are available. */
    bool try_acquire(std::ptrdiff_t n = 1) { return attempt(n, 0); }
    bool try_acquire(std::ptrdiff_t n, std::error_code &ec) noexcept { return attempt(n, 0, ec); }
    template <class Rep, class Period>
    bool try_acquire_for(const std::chrono::duration<Rep, Period> &d, std::ptrdiff_t n = 1) {
        return attempt(n, detail::to_ms(d));
    }
    template <class Rep, class Period>
    bool try_acquire_for(const std::chrono::duration<Rep, Period> &d, std::ptrdiff_t n,
                         std::error_code &ec) noexcept {
        return attempt(n, detail::to_ms(d), ec);
    }
    template <class Clock, class Duration>
    bool try_acquire_until(const std::chrono::time_point<Clock, Duration> &t, std::ptrdiff_t n = 1) {
        return attempt(n, detail::until_ms(t));
    }
    template <class Clock, class Duration>
    bool try_acquire_until(const std::chrono::time_point<Clock, Duration> &t, std::ptrdiff_t n,
                           std::error_code &ec) noexcept {
        return attempt(n, detail::until_ms(t), ec);
    }
    /* Gives n permits back (whoever took them). */
    void release(std::ptrdiff_t n = 1) { detail::check(dlock_semaphore_release(get(), n)); }
    bool release(std::ptrdiff_t n, std::error_code &ec) noexcept {
        return detail::set(ec, dlock_semaphore_release(get(), n));
    }

    /* The permits available now (negative after some were taken away). */
    int64_t available() const {
        int64_t n = 0;
        detail::check(dlock_semaphore_available(get(), &n));
        return n;
    }
    /* Sets the count only when the semaphore does not exist; true when set. */
    bool try_set_permits(int64_t n) {
        int set = 0;
        detail::check(dlock_semaphore_try_set_permits(get(), n, &set));
        return set != 0;
    }
    void set_permits(int64_t n) { detail::check(dlock_semaphore_set_permits(get(), n)); }
    void add_permits(int64_t delta) { detail::check(dlock_semaphore_add_permits(get(), delta)); }
    /* Takes every available permit; returns how many there were. */
    int64_t drain() {
        int64_t n = 0;
        detail::check(dlock_semaphore_drain(get(), &n));
        return n;
    }

    std::string name() const { return dlock_semaphore_name(get()); }
    dlock_semaphore *native_handle() const noexcept { return h_.get(); }

  private:
    dlock_semaphore *get() const noexcept { return h_.get(); }
    bool attempt(std::ptrdiff_t n, int64_t wait_ms) {
        int rc = dlock_semaphore_try(get(), n, wait_ms);
        if (rc == DLOCK_ETIMEDOUT)
            return false;
        detail::check(rc);
        return true;
    }
    bool attempt(std::ptrdiff_t n, int64_t wait_ms, std::error_code &ec) noexcept {
        int rc = dlock_semaphore_try(get(), n, wait_ms);
        detail::set(ec, rc == DLOCK_ETIMEDOUT ? DLOCK_OK : rc);
        return rc == DLOCK_OK;
    }
    detail::handle<dlock_semaphore, &dlock_semaphore_free> h_;
};

/* A semaphore of named, leased permits, Redisson's RPermitExpirableSemaphore
 * (dlock_permit_semaphore_get). acquire gives the permit's id, which any
 * thread or process may release; a permit whose lease ends comes back by
 * itself (lease dlock::watchdog: renewed while the client lives). */
class permit_semaphore {
  public:
    permit_semaphore(const client &c, const std::string &name)
        : h_(detail::make<dlock_permit_semaphore, &dlock_permit_semaphore_free>(
              c, [&](dlock_client *cc, dlock_permit_semaphore **out) {
                  return dlock_permit_semaphore_get(cc, name.c_str(), out);
              })) {}

    /* Takes one permit, waiting as long as it takes; returns its id. */
    std::string acquire(std::chrono::milliseconds lease = watchdog) {
        char id[DLOCK_PERMIT_ID_BUFSIZE];
        detail::check(dlock_permit_semaphore_acquire(get(), lease.count(), id, sizeof id));
        return id;
    }
    /* Waits up to d for a permit: its id, or "" when none came. */
    template <class Rep, class Period>
    std::string try_acquire_for(const std::chrono::duration<Rep, Period> &d,
                                std::chrono::milliseconds lease = watchdog) {
        char id[DLOCK_PERMIT_ID_BUFSIZE];
        int rc = dlock_permit_semaphore_try(get(), detail::to_ms(d), lease.count(), id, sizeof id);
        if (rc == DLOCK_ETIMEDOUT)
            return std::string();
        detail::check(rc);
        return id;
    }
    std::string try_acquire(std::chrono::milliseconds lease = watchdog) {
        return try_acquire_for(std::chrono::milliseconds(0), lease);
    }
    /* Gives permit id back: DLOCK_ENOTOWNER when no permit has it any more. */
    void release(const std::string &id) {
        detail::check(dlock_permit_semaphore_release(get(), id.c_str()));
    }
    bool release(const std::string &id, std::error_code &ec) noexcept {
        return detail::set(ec, dlock_permit_semaphore_release(get(), id.c_str()));
    }
    int64_t available() const {
        int64_t n = 0;
        detail::check(dlock_permit_semaphore_available(get(), &n, nullptr));
        return n;
    }
    bool try_set_permits(int64_t n) {
        int set = 0;
        detail::check(dlock_permit_semaphore_try_set_permits(get(), n, &set));
        return set != 0;
    }

    std::string name() const { return dlock_permit_semaphore_name(get()); }
    dlock_permit_semaphore *native_handle() const noexcept { return h_.get(); }

  private:
    dlock_permit_semaphore *get() const noexcept { return h_.get(); }
    detail::handle<dlock_permit_semaphore, &dlock_permit_semaphore_free> h_;
};

/* ------------------------------------------------------------------- latch */

/* A count-down latch, Redisson's RCountDownLatch (dlock_latch_get), used as
 * std::latch is; its count is set with try_set_count (when at zero). */
class latch {
  public:
    latch(const client &c, const std::string &name)
        : h_(detail::make<dlock_latch, &dlock_latch_free>(c, [&](dlock_client *cc, dlock_latch **out) {
              return dlock_latch_get(cc, name.c_str(), out);
          })) {}

    bool try_set_count(int64_t n) {
        int set = 0;
        detail::check(dlock_latch_try_set_count(get(), n, &set));
        return set != 0;
    }
    /* Counts down n times (one round trip each). */
    void count_down(std::ptrdiff_t n = 1) {
        for (std::ptrdiff_t i = 0; i < n; i++)
            detail::check(dlock_latch_count_down(get()));
    }
    int64_t count() const {
        int64_t n = 0;
        detail::check(dlock_latch_count(get(), &n));
        return n;
    }
    /* True when the count is zero (one check). */
    bool try_wait() const { return wait_ms(0); }
    /* Waits until the count is zero. */
    void wait() const { (void)wait_ms(detail::forever_ms); }
    /* Waits up to d: false when the count is not zero by then. */
    template <class Rep, class Period>
    bool wait_for(const std::chrono::duration<Rep, Period> &d) const {
        return wait_ms(detail::to_ms(d));
    }
    template <class Clock, class Duration>
    bool wait_until(const std::chrono::time_point<Clock, Duration> &t) const {
        return wait_ms(detail::until_ms(t));
    }
    void arrive_and_wait(std::ptrdiff_t n = 1) {
        count_down(n);
        wait();
    }

    std::string name() const { return dlock_latch_name(get()); }
    dlock_latch *native_handle() const noexcept { return h_.get(); }

  private:
    dlock_latch *get() const noexcept { return h_.get(); }
    bool wait_ms(int64_t ms) const {
        int rc = dlock_latch_await(get(), ms);
        if (rc == DLOCK_ETIMEDOUT)
            return false;
        detail::check(rc);
        return true;
    }
    detail::handle<dlock_latch, &dlock_latch_free> h_;
};

}  // namespace dlock

/* So that a std::error_code compares with the enumerators: ec == DLOCK_ETIMEDOUT. */
namespace std {
template <>
struct is_error_code_enum<dlock_status> : true_type {};
}  // namespace std
/* Found by argument-dependent lookup for the C enum (global namespace). */
inline std::error_code make_error_code(dlock_status s) noexcept { return dlock::make_error_code(s); }

#endif /* DLOCK_DLOCK_HPP */
