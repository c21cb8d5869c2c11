/* A loopback TCP proxy in front of a test Redis, for injecting faults that a
 * real network has: replies that never arrive, connections cut mid-request. */
#ifndef DLOCK_TEST_PROXY_H
#define DLOCK_TEST_PROXY_H

typedef struct th_proxy th_proxy;

/* Listens on a free 127.0.0.1 port and forwards to 127.0.0.1:target_port. */
th_proxy *th_proxy_start(int target_port);
int th_proxy_port(const th_proxy *p);
/* Connections open now stop getting the server's replies (requests still go
 * through); connections opened later are unaffected. */
void th_proxy_swallow_replies(th_proxy *p);
/* While on, nothing passes in either direction and new connections hang
 * (a partition); off resumes (connections cut meanwhile stay closed). */
void th_proxy_blackhole(th_proxy *p, int on);
/* Connections opened from now on go to 127.0.0.1:target_port (those open
 * stay where they are): a DNS name that now names another server. */
void th_proxy_retarget(th_proxy *p, int target_port);
/* From now on a request chunk (client to server) that contains `needle` is
 * held delay_ms before it is passed on, and its connection with it (its
 * other requests and replies wait behind it); other connections are not
 * delayed. th_proxy_delayed: such chunks read so far; th_proxy_passed: those
 * passed on. NULL needle: off. */
void th_proxy_delay_match(th_proxy *p, const char *needle, int delay_ms);
int th_proxy_delayed(th_proxy *p);
/* As th_proxy_delay_match, but the matching request passes at once and the
 * next reply on its connection is held delay_ms instead (the request ran;
 * its answer is late). th_proxy_delayed counts the matches. */
void th_proxy_delay_reply_match(th_proxy *p, const char *needle, int delay_ms);
int th_proxy_passed(th_proxy *p);
/* From now on every TIME answer (an array of two bulk strings: 10 digits of
 * seconds, up to 6 of microseconds) that passes is moved by shift_us: the
 * server's clock as a client sees it steps by that much (a jump). Only the
 * answers are changed: the server's own clock, and so its expiry, is not
 * (the test makes a jump's effect on the keys itself). While a shift is
 * set, the start of a possible answer at the end of a read waits for the
 * rest. th_proxy_times: TIME answers passed so far. */
void th_proxy_shift_time(th_proxy *p, long long shift_us);
int th_proxy_times(th_proxy *p);
/* Closes every connection open now. */
void th_proxy_cut(th_proxy *p);
void th_proxy_stop(th_proxy *p);

#endif
