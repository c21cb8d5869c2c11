// dlock from C++ with include/dlock/dlock.hpp: the standard's guards on a
// distributed lock, and a distributed semaphore used as
// std::counting_semaphore is.
//
//   example_guards URL
//
// Three workers, each with a client of its own (as three processes would
// have), take turns under std::unique_lock on one lock for five rounds
// each, then pass through a semaphore of two permits, then take a term as
// leader of an election (std::unique_lock<dlock::election>) under a
// multi-lock of two more locks. Meanwhile a fourth thread waits for the
// first lock with a cancel token that main fires. Prints each turn and exits
// 0 when no two workers were ever inside the lock (or leading) at once,
// never more than two inside the semaphore, and the cancelled wait ended
// with DLOCK_ECANCELED.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <dlock/dlock.hpp>

int main(int argc, char **argv) {
    const char *env = std::getenv("DLOCK_URL");
    std::string url = argc > 1 ? argv[1] : env ? env : "redis://127.0.0.1:6379";
    std::string lock_name = "example:guards:" + std::to_string(std::time(nullptr));
    std::string sem_name = lock_name + ":sem";
    try {
        dlock::client setup(url);
        dlock::semaphore(setup, sem_name).set_permits(2);

        std::atomic<int> inside{0}, overlaps{0}, in_sem{0}, max_sem{0}, leaders{0};
        std::string elect_name = lock_name + ":leader";
        std::vector<std::thread> workers;
        for (int w = 0; w < 3; w++) {
            workers.emplace_back([&, w] {
                try {
                    dlock::client c(url);
                    dlock::mutex m(c, lock_name);   // owner: this thread
                    for (int round = 1; round <= 5; round++) {
                        std::unique_lock<dlock::mutex> g(m);   // waits; watchdog lease
                        if (inside.fetch_add(1) != 0)
                            overlaps++;
                        std::printf("worker %d holds the lock (round %d/5)\n", w, round);
                        std::fflush(stdout);
                        std::this_thread::sleep_for(std::chrono::milliseconds(10));
                        inside--;
                    }   // each round's guard releases the lock

                    dlock::semaphore s(c, sem_name);
                    if (!s.try_acquire_for(std::chrono::seconds(10)))
                        return;
                    int n = ++in_sem;
                    for (int m = max_sem; n > m && !max_sem.compare_exchange_weak(m, n);) {
                    }
                    std::this_thread::sleep_for(std::chrono::milliseconds(50));
                    in_sem--;
                    s.release();

                    // Both locks or neither, then a term as leader: the
                    // guards resign and release in reverse order.
                    dlock::mutex a(c, lock_name + ":a"), b(c, lock_name + ":b");
                    dlock::multi_lock both({a, b});
                    dlock::election e(c, elect_name);
                    std::scoped_lock g(both);
                    std::unique_lock<dlock::election> lead(e, std::chrono::seconds(10));
                    if (!lead)
                        return;
                    if (leaders.fetch_add(1) != 0)
                        overlaps++;
                    std::printf("worker %d leads, term %llu\n", w,
                                static_cast<unsigned long long>(e.term()));
                    std::fflush(stdout);
                    leaders--;
                } catch (const dlock::error &e) {
                    std::fprintf(stderr, "worker %d: %s\n", w, e.what());
                    overlaps = 1000;
                }
            });
        }
        // A waiter that gives up when told: cancel_token::fire() from
        // another thread (under C++20 a std::stop_token does it too).
        dlock::cancel_token stop;
        int cancelled = 0;
        {
            dlock::mutex m(setup, lock_name);
            std::lock_guard<dlock::mutex> g(m);   // held first: the waiter waits
            std::thread waiter([&] {
                dlock::client c(url);
                dlock::mutex mw(c, lock_name);
                std::error_code ec;
                if (!mw.lock(stop, ec) && ec == DLOCK_ECANCELED)
                    cancelled = 1;
                else if (!ec)
                    mw.unlock();
            });
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
            stop.fire();
            waiter.join();
        }
        for (auto &t : workers)
            t.join();
        std::printf("15 turns, %d overlapping; at most %d of 3 inside the semaphore of 2; "
                    "the cancelled wait %s\n",
                    overlaps.load(), max_sem.load(), cancelled ? "ended" : "did NOT end");
        return overlaps == 0 && max_sem >= 1 && max_sem <= 2 && cancelled ? 0 : 1;
    } catch (const dlock::error &e) {
        // e.status() is the dlock status, e.what() dlock_last_error()'s message.
        std::fprintf(stderr, "%s: %s\n", dlock_errname(e.status()), e.what());
        return e.status() == DLOCK_EINVAL ? 64 : 69;
    }
}
