/* SPDX-License-Identifier: MIT */
/* The control socket's protocol (proto/): the call table, frames over a real socketpair
 * (fds with SCM_RIGHTS, truncated, oversized and malformed frames, short writes), the
 * error codec and the version check on both sides. */
#include "helpers.h"

#include <pthread.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "client.h"
#include "codec.h"
#include "frame.h"
#include "util.h"

/* ---- fixtures ---- */

typedef struct pair {
        int a, b; /* a writes, b reads (both may do either) */
        lfs_frame_reader reader; /* on b */
        lfs_error *err;
} pair;

static int pair_setup(void **state) {
        pair *p = calloc(1, sizeof(*p));
        int sv[2];
        if (!p || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
                free(p);
                return -1;
        }
        p->a = sv[0];
        p->b = sv[1];
        lfs_frame_reader_init(&p->reader, p->b, LFS_FRAME_MAX_REQUEST, LFS_CALL_MAX_FDS);
        *state = p;
        return 0;
}

static int pair_teardown(void **state) {
        pair *p = *state;
        lfs_frame_reader_done(&p->reader);
        if (p->a >= 0)
                close(p->a);
        close(p->b);
        lfs_error_free(p->err);
        free(p);
        return 0;
}

#define pair_test(f) cmocka_unit_test_setup_teardown(f, pair_setup, pair_teardown)

static void send_raw(int fd, const void *bytes, size_t n) {
        size_t done = 0;
        while (done < n) {
                ssize_t k = send(fd, (const char *)bytes + done, n - done, MSG_NOSIGNAL);
                assert_msg(k > 0, "send: %s", strerror(errno));
                done += (size_t)k;
        }
}

/* Expects a refusal of code whose message has text; clears it. */
static void expect_err(lfs_error **err, int r, int want_r, lfs_code code, const char *text) {
        assert_msg(r == want_r, "returned %d (%s), expected %d", r, *err ? (*err)->message : "no error",
                   want_r);
        assert_non_null(*err);
        assert_msg((*err)->code == code, "code %s, expected %s: %s", lfs_code_name((*err)->code),
                   lfs_code_name(code), (*err)->message);
        assert_msg(strstr((*err)->message, text), "message '%s' does not say '%s'", (*err)->message, text);
        lfs_error_free(*err);
        *err = NULL;
}

static json_t *read_one(pair *p) {
        json_t *frame = NULL;
        int r = lfs_frame_read(&p->reader, &frame, &p->err);
        assert_msg(r == 1, "read returned %d: %s", r, p->err ? p->err->message : "");
        return frame;
}

/* fd is open, close-on-exec, and the same file as other. */
static void assert_same_file(int fd, int other) {
        struct stat a, b;
        assert_int_equal(fstat(fd, &a), 0);
        assert_int_equal(fstat(other, &b), 0);
        assert_true(a.st_dev == b.st_dev && a.st_ino == b.st_ino);
        assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
}

static bool fd_open(int fd) {
        return fcntl(fd, F_GETFD) >= 0;
}

/* ---- the call table ---- */

static void test_call_table(void **state) {
        (void)state;
        for (unsigned i = 0; i < LFS_CALL_COUNT; i++) {
                const char *name = lfs_call_name((lfs_call)i);
                assert_non_null(name);
                /* group.method, lower case. */
                const char *dot = strchr(name, '.');
                assert_msg(dot && dot > name && dot[1] && !strchr(dot + 1, '.'), "'%s' is not group.method",
                           name);
                for (const char *c = name; *c; c++)
                        assert_msg((*c >= 'a' && *c <= 'z') || *c == '_' || *c == '.', "'%s'", name);
                lfs_call back;
                assert_int_equal(lfs_call_from_name(name, &back), 0);
                assert_int_equal(back, i);
                for (unsigned j = 0; j < i; j++)
                        assert_msg(strcmp(name, lfs_call_name((lfs_call)j)), "'%s' twice", name);
                assert_true(lfs_call_fds((lfs_call)i) <= LFS_CALL_MAX_FDS);
        }
        lfs_call c;
        assert_int_equal(lfs_call_from_name("workspace.exec", &c), 0);
        assert_int_equal(c, LFS_CALL_WORKSPACE_EXEC);
        assert_int_equal(lfs_call_fds(c), 3);
        assert_true(lfs_call_flags(c) & LFS_CALL_UNLOCKED);
        assert_true(lfs_call_flags(LFS_CALL_SANDBOX_EVENTS) & LFS_CALL_STREAMS);
        assert_false(lfs_call_flags(LFS_CALL_WORKSPACE_COMMIT) & LFS_CALL_UNLOCKED);
        assert_int_equal(lfs_call_fds(LFS_CALL_SANDBOX_PING), 0);
        assert_int_equal(lfs_call_from_name("sandbox.nope", &c), -ENOENT);
        assert_int_equal(lfs_call_from_name("", &c), -ENOENT);
        assert_int_equal(lfs_call_from_name(NULL, &c), -ENOENT);
        assert_null(lfs_call_name(LFS_CALL_COUNT));
        assert_null(lfs_call_name((lfs_call)-1));
}

/* ---- frames ---- */

static void test_request_round_trip(void **state) {
        pair *p = *state;
        json_t *req = lfs_proto_request(LFS_CALL_WORKSPACE_COMMIT, "0123abcd");
        json_object_set_new(req, "branch", json_string("feature/x"));
        json_object_set_new(req, "message", json_string("line one\nline two ünï"));
        assert_int_equal(lfs_frame_write(p->a, req, LFS_FRAME_MAX_REQUEST, NULL, 0, false, &p->err), 0);
        json_decref(req);
        json_t *got = read_one(p);
        lfs_call call;
        assert_int_equal(lfs_proto_parse_request(got, "0123abcd", &call, &p->err), 0);
        assert_int_equal(call, LFS_CALL_WORKSPACE_COMMIT);
        assert_string_equal(json_string_value(json_object_get(got, "message")), "line one\nline two ünï");
        assert_int_equal(json_integer_value(json_object_get(got, "v")), LFS_PROTO_VERSION);
        json_decref(got);
        /* The peer closes between frames: a clean end. */
        close(p->a);
        p->a = -1;
        json_t *none = NULL;
        assert_int_equal(lfs_frame_read(&p->reader, &none, &p->err), 0);
        assert_null(none);
        assert_null(p->err);
}

static void test_answers_round_trip(void **state) {
        pair *p = *state;
        /* ok with a result, ok without one, an error with paths, a stream. */
        json_t *frames[] = {
                lfs_proto_ok(json_pack("{s:s, s:b}", "commit", "ab", "merged", 1)),
                lfs_proto_done(),
                lfs_proto_errorf(LFS_DIRTY, "the Workspace of '%s' has uncommitted changes", "main"),
                lfs_proto_stream_item(json_pack("{s:s, s:i}", "event", "start", "pid", 42)),
        };
        /* All in one write: the reader keeps what follows a frame for the next. */
        char *all = xstrdup("");
        for (size_t i = 0; i < COUNT_OF(frames); i++) {
                char *text = json_dumps(frames[i], JSON_COMPACT), *more = xasprintf("%s%s\n", all, text);
                free(text);
                free(all);
                all = more;
                json_decref(frames[i]);
        }
        send_raw(p->a, all, strlen(all));
        free(all);
        json_t *result = NULL, *answer = read_one(p);
        assert_int_equal(lfs_proto_parse_answer(answer, &result, &p->err), 0);
        assert_string_equal(json_string_value(json_object_get(result, "commit")), "ab");
        json_decref(result);
        json_decref(answer);
        answer = read_one(p);
        assert_int_equal(lfs_proto_parse_answer(answer, &result, &p->err), 0);
        assert_true(json_is_object(result) && json_object_size(result) == 0);
        json_decref(result);
        json_decref(answer);
        answer = read_one(p);
        result = NULL;
        expect_err(&p->err, lfs_proto_parse_answer(answer, &result, &p->err), -EINVAL, LFS_DIRTY,
                   "the Workspace of 'main' has uncommitted changes");
        assert_null(result);
        json_decref(answer);
        json_t *item = NULL, *frame = read_one(p);
        assert_int_equal(lfs_proto_parse_stream_item(frame, &item, &p->err), 0);
        assert_null(json_object_get(item, "v"));
        assert_int_equal(json_integer_value(json_object_get(item, "pid")), 42);
        json_decref(item);
        json_decref(frame);
}

/* A result that could not be made (json_pack of a NULL string) is no success. */
static void test_unmade_result_is_failure(void **state) {
        (void)state;
        lfs_error *err = NULL;
        json_t *result = NULL, *answer = lfs_proto_ok(json_pack("{s:s}", "path", (const char *)NULL));
        expect_err(&err, lfs_proto_parse_answer(answer, &result, &err), -EINVAL, LFS_FAILED,
                   "the daemon could not encode its answer");
        assert_null(result);
        json_decref(answer);
}

static void test_error_codec(void **state) {
        (void)state;
        lfs_error *err = NULL;
        char **paths = xcalloc(3, sizeof(char *));
        paths[0] = xstrdup("a/plain.txt");
        paths[1] = xstrdup("b/bad\xffname");
        paths[2] = xstrdup("c/ünï");
        lfs_fail_conflict(&err, paths, 3, "merging feature into main: 3 paths conflict");
        json_t *obj = lfs_error_to_json(err);
        assert_string_equal(json_string_value(json_object_get(obj, "code")), "Conflict");
        assert_non_null(json_object_get(obj, "paths_bytes"));
        /* Through text, as on the wire. */
        char *text = json_dumps(obj, JSON_COMPACT);
        json_decref(obj);
        obj = json_loads(text, 0, NULL);
        free(text);
        lfs_error *back = NULL;
        assert_int_equal(lfs_error_from_json(obj, &back, NULL), 0);
        json_decref(obj);
        assert_int_equal(back->code, LFS_CONFLICT);
        assert_string_equal(back->message, err->message);
        assert_int_equal(back->n_paths, 3);
        for (size_t i = 0; i < 3; i++)
                assert_string_equal(back->paths[i], err->paths[i]);
        lfs_error_free(back);
        lfs_error_free(err);
        err = NULL;
        /* Every code by its SPEC name, both ways. */
        for (int c = LFS_INVALID_INPUT; c <= LFS_FAILED; c++) {
                lfs_error e = { .code = (lfs_code)c, .message = (char *)"m" };
                obj = lfs_error_to_json(&e);
                assert_null(json_object_get(obj, "paths"));
                assert_int_equal(lfs_error_from_json(obj, &back, NULL), 0);
                assert_int_equal(back->code, c);
                lfs_error_free(back);
                json_decref(obj);
        }
        /* An unknown code reads as Failed and keeps its name; not an object is refused. */
        obj = json_pack("{s:s, s:s}", "code", "NewCode", "message", "from a newer daemon");
        assert_int_equal(lfs_error_from_json(obj, &back, NULL), 0);
        assert_int_equal(back->code, LFS_FAILED);
        assert_non_null(strstr(back->message, "from a newer daemon"));
        assert_non_null(strstr(back->message, "NewCode"));
        lfs_error_free(back);
        json_decref(obj);
        obj = json_string("Busy");
        assert_int_equal(lfs_error_from_json(obj, &back, &err), -EBADMSG);
        assert_int_equal(err->code, LFS_FAILED);
        lfs_error_free(err);
        json_decref(obj);
}

static void test_fds_passed(void **state) {
        pair *p = *state;
        int pipes[3][2];
        int ends[3];
        for (int i = 0; i < 3; i++) {
                assert_int_equal(pipe2(pipes[i], O_CLOEXEC), 0);
                ends[i] = pipes[i][i == 0 ? 0 : 1];
        }
        json_t *req = lfs_proto_request(LFS_CALL_WORKSPACE_EXEC, "t");
        assert_int_equal(lfs_frame_write(p->a, req, LFS_FRAME_MAX_REQUEST, ends, 3, false, &p->err), 0);
        json_decref(req);
        json_t *got = read_one(p);
        json_decref(got);
        int fds[3];
        assert_int_equal(lfs_frame_take_fds(&p->reader, "workspace.exec", 3, fds, &p->err), 0);
        for (int i = 0; i < 3; i++) {
                assert_same_file(fds[i], ends[i]);
                close(fds[i]);
                close(pipes[i][0]);
                close(pipes[i][1]);
        }
}

/* fds where the call takes none, or too many: all closed, and the refusal says so. */
static void test_unexpected_fds(void **state) {
        pair *p = *state;
        int fds[LFS_CALL_MAX_FDS + 1];
        for (size_t i = 0; i < COUNT_OF(fds); i++)
                assert_true((fds[i] = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0);
        json_t *req = lfs_proto_request(LFS_CALL_SANDBOX_PING, "t");
        assert_int_equal(lfs_frame_write(p->a, req, LFS_FRAME_MAX_REQUEST, fds, 2, false, &p->err), 0);
        json_t *got = read_one(p);
        json_decref(got);
        assert_int_equal(p->reader.n_fds, 2);
        int received[2] = { p->reader.fds[0], p->reader.fds[1] };
        int none[1];
        expect_err(&p->err, lfs_frame_take_fds(&p->reader, "sandbox.ping", 0, none, &p->err), -EBADF,
                   LFS_INVALID_INPUT, "'sandbox.ping' takes no fds, but 2 came");
        assert_false(fd_open(received[0]));
        assert_false(fd_open(received[1]));
        /* Four, one more than any call takes: the writer refuses to send them... */
        expect_err(&p->err, lfs_frame_write(p->a, req, LFS_FRAME_MAX_REQUEST, fds, 4, false, &p->err),
                   -EINVAL, LFS_INVALID_INPUT, "at most 3 fds");
        json_decref(req);
        /* ...and a reader given four by hand keeps three, closes the fourth, refuses all. */
        char byte = '\n';
        union {
                char buf[CMSG_SPACE(sizeof(int) * 4)];
                struct cmsghdr align;
        } control = { 0 };
        struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
        struct msghdr msg = { .msg_iov = &iov,
                              .msg_iovlen = 1,
                              .msg_control = control.buf,
                              .msg_controllen = sizeof(control.buf) };
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
        *c = (struct cmsghdr){ .cmsg_level = SOL_SOCKET,
                               .cmsg_type = SCM_RIGHTS,
                               .cmsg_len = CMSG_LEN(sizeof(int) * 4) };
        memcpy(CMSG_DATA(c), fds, sizeof(int) * 4);
        assert_int_equal(sendmsg(p->a, &msg, 0), 1);
        json_t *frame = NULL;
        /* The lone newline is an empty frame: not JSON. */
        expect_err(&p->err, lfs_frame_read(&p->reader, &frame, &p->err), -EBADMSG, LFS_INVALID_INPUT,
                   "not one JSON text");
        assert_int_equal(p->reader.n_fds, 3);
        assert_int_equal(p->reader.fds_dropped, 1);
        int three[3];
        expect_err(&p->err, lfs_frame_take_fds(&p->reader, "workspace.exec", 3, three, &p->err), -EBADF,
                   LFS_INVALID_INPUT, "takes 3 fds with its request (SCM_RIGHTS), but 4 came");
        assert_int_equal(p->reader.n_fds, 0);
        for (size_t i = 0; i < COUNT_OF(fds); i++)
                close(fds[i]);
}

static void test_truncated_frame(void **state) {
        pair *p = *state;
        const char *cut = "{\"v\":1,\"token\":\"t\",\"call\":\"sandbox.pi";
        send_raw(p->a, cut, strlen(cut));
        shutdown(p->a, SHUT_WR);
        json_t *frame = NULL;
        expect_err(&p->err, lfs_frame_read(&p->reader, &frame, &p->err), -EPROTO, LFS_INVALID_INPUT,
                   "the connection ended in the middle of a frame");
        assert_null(frame);
}

static void test_oversized_frame(void **state) {
        pair *p = *state;
        lfs_frame_reader_done(&p->reader);
        lfs_frame_reader_init(&p->reader, p->b, 1024, 0);
        /* A frame of exactly the most bytes (newline included) is read... */
        char *exact = xmalloc(1024);
        memset(exact, ' ', 1024);
        memcpy(exact, "{\"a\":1}", 7);
        exact[1023] = '\n';
        send_raw(p->a, exact, 1024);
        free(exact);
        json_t *frame = read_one(p);
        json_decref(frame);
        /* ...one byte more is refused, without waiting for its end. */
        char *big = xmalloc(4000);
        memset(big, 'x', 4000);
        send_raw(p->a, big, 1025);
        expect_err(&p->err, lfs_frame_read(&p->reader, &frame, &p->err), -EMSGSIZE, LFS_INVALID_INPUT,
                   "longer than 1024 bytes");
        free(big);
        /* The writer refuses a frame longer than its reader takes, sending nothing. */
        json_t *req = lfs_proto_request(LFS_CALL_WORKSPACE_EXEC, "t");
        json_object_set_new(req, "pad", json_stringn_nocheck("y", 1)); /* a small one is sent */
        assert_int_equal(lfs_frame_write(p->a, req, 1024, NULL, 0, false, &p->err), 0);
        char *pad = xmalloc(2000);
        memset(pad, 'y', 2000);
        json_object_set_new(req, "pad", json_stringn(pad, 2000));
        free(pad);
        expect_err(&p->err, lfs_frame_write(p->a, req, 1024, NULL, 0, false, &p->err), -EMSGSIZE,
                   LFS_INVALID_INPUT, "more than the 1024 its reader takes");
        json_decref(req);
}

/* Each malformed frame is refused by name; the next frame on the connection still reads. */
static void test_malformed_frames(void **state) {
        pair *p = *state;
        static const struct {
                const char *line, *says;
        } bad[] = {
                { "nonsense\n", "not one JSON text" },
                { "[1,2]\n", "is an array, not a JSON object" },
                { "\"call\"\n", "is a string, not a JSON object" },
                { "42\n", "is a number, not a JSON object" },
                { "null\n", "is null, not a JSON object" },
                { "{\"call\":\"a\",\"call\":\"b\"}\n", "duplicate" },
                { "{\"v\":1} trailing\n", "not one JSON text" },
                { "{\"v\":1\n", "not one JSON text" },
                { "{\"s\":\"\xff\"}\n", "not one JSON text" },
                { "\n", "not one JSON text" },
        };
        for (size_t i = 0; i < COUNT_OF(bad); i++) {
                send_raw(p->a, bad[i].line, strlen(bad[i].line));
                json_t *frame = NULL;
                int r = lfs_frame_read(&p->reader, &frame, &p->err);
                assert_msg(r == -EBADMSG && p->err, "line %zu read as %d", i, r);
                assert_msg(strstr(p->err->message, bad[i].says), "line %zu: '%s' does not say '%s'", i,
                           p->err->message, bad[i].says);
                lfs_error_free(p->err);
                p->err = NULL;
        }
        send_raw(p->a, "{\"v\":1}\n", 8);
        json_t *frame = read_one(p);
        json_decref(frame);
}

/* A frame larger than the socket's buffer, written to a non-blocking socket while the
 * reader takes it in pieces: short writes, waits, and the fds with the first bytes. */
static void test_short_writes(void **state) {
        pair *p = *state;
        int sndbuf = 4096;
        assert_int_equal(setsockopt(p->a, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf)), 0);
        assert_int_equal(fcntl(p->a, F_SETFL, O_NONBLOCK), 0);
        size_t n = 900 * 1000;
        char *pad = xmalloc(n);
        memset(pad, 'z', n);
        json_t *req = lfs_proto_request(LFS_CALL_WORKSPACE_EXEC, "t");
        json_object_set_new(req, "pad", json_stringn(pad, n));
        free(pad);
        int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
        int ends[3] = { devnull, devnull, devnull };
        fflush(stdout);
        fflush(stderr);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                lfs_error *e = NULL;
                _exit(lfs_frame_write(p->a, req, LFS_FRAME_MAX_REQUEST, ends, 3, false, &e) == 0 ? 0 : 1);
        }
        json_decref(req);
        json_t *got = read_one(p);
        int status;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        assert_int_equal(strlen(json_string_value(json_object_get(got, "pad"))), n);
        json_decref(got);
        int fds[3];
        assert_int_equal(lfs_frame_take_fds(&p->reader, "workspace.exec", 3, fds, &p->err), 0);
        for (int i = 0; i < 3; i++) {
                assert_same_file(fds[i], devnull);
                close(fds[i]);
        }
        /* With dontwait, a full socket is -EAGAIN rather than a wait (nobody reads now). */
        json_t *big = json_pack("{s:s}", "pad", "x");
        int r = 0;
        for (int i = 0; i < 100000 && r == 0; i++)
                r = lfs_frame_write(p->a, big, LFS_FRAME_MAX_REQUEST, NULL, 0, true, &p->err);
        expect_err(&p->err, r, -EAGAIN, LFS_FAILED, "cannot write to the socket");
        json_decref(big);
        close(devnull);
}

/* A non-blocking reader: a frame that came in part is -EAGAIN, then whole. */
static void test_nonblocking_read(void **state) {
        pair *p = *state;
        assert_int_equal(fcntl(p->b, F_SETFL, O_NONBLOCK), 0);
        json_t *frame = NULL;
        assert_int_equal(lfs_frame_read(&p->reader, &frame, &p->err), -EAGAIN);
        send_raw(p->a, "{\"v\":", 5);
        assert_int_equal(lfs_frame_read(&p->reader, &frame, &p->err), -EAGAIN);
        assert_null(p->err);
        send_raw(p->a, "1}\n", 3);
        frame = read_one(p);
        assert_int_equal(json_integer_value(json_object_get(frame, "v")), 1);
        json_decref(frame);
}

/* ---- requests as the daemon takes them ---- */

static void expect_request_refused(json_t *req, lfs_code code, const char *says) {
        lfs_error *err = NULL;
        lfs_call call = LFS_CALL_COUNT;
        int r = lfs_proto_parse_request(req, "secret", &call, &err);
        assert_msg(r < 0 && err, "request taken as call %d", call);
        assert_int_equal(call, LFS_CALL_COUNT); /* ret_ untouched */
        assert_msg(err->code == code && strstr(err->message, says), "%s: %s (expected %s, '%s')",
                   lfs_code_name(err->code), err->message, lfs_code_name(code), says);
        lfs_error_free(err);
        json_decref(req);
}

static void test_request_refusals(void **state) {
        (void)state;
        expect_request_refused(
                json_pack("{s:i, s:s, s:s}", "v", 1, "token", "secret", "call", "sandbox.nope"),
                LFS_INVALID_INPUT, "unknown call 'sandbox.nope'; the calls are sandbox.ping");
        expect_request_refused(json_pack("{s:i, s:s, s:i}", "v", 1, "token", "secret", "call", 7),
                               LFS_INVALID_INPUT, "names no call");
        expect_request_refused(json_pack("{s:i, s:s}", "v", 1, "token", "secret"), LFS_INVALID_INPUT,
                               "names no call");
        expect_request_refused(
                json_pack("{s:i, s:s, s:s}", "v", 1, "token", "secreT", "call", "sandbox.ping"),
                LFS_PERMISSION_DENIED, "token");
        expect_request_refused(
                json_pack("{s:i, s:s, s:s}", "v", 1, "token", "secret2", "call", "sandbox.ping"),
                LFS_PERMISSION_DENIED, "token");
        expect_request_refused(json_pack("{s:i, s:i, s:s}", "v", 1, "token", 5, "call", "sandbox.ping"),
                               LFS_PERMISSION_DENIED, "token");
        /* Every name of the table is taken. */
        for (unsigned i = 0; i < LFS_CALL_COUNT; i++) {
                json_t *req = lfs_proto_request((lfs_call)i, "secret");
                lfs_call call;
                lfs_error *err = NULL;
                assert_int_equal(lfs_proto_parse_request(req, "secret", &call, &err), 0);
                assert_int_equal(call, i);
                json_decref(req);
        }
}

/* ---- versions ---- */

static void test_version_mismatch(void **state) {
        (void)state;
        char ours[16];
        snprintf(ours, sizeof(ours), "version %d", LFS_PROTO_VERSION);
        /* A daemon refuses a request of another version, or none, before its token. */
        json_t *newer = json_pack("{s:i, s:s, s:s}", "v", LFS_PROTO_VERSION + 1, "token", "secret", "call",
                                  "sandbox.ping");
        expect_request_refused(json_incref(newer), LFS_UNSUPPORTED, "different builds");
        expect_request_refused(newer, LFS_UNSUPPORTED, ours);
        expect_request_refused(json_pack("{s:s, s:s}", "token", "secret", "call", "sandbox.ping"),
                               LFS_UNSUPPORTED, "version none");
        expect_request_refused(json_pack("{s:s, s:s, s:s}", "v", "1", "token", "x", "call", "sandbox.ping"),
                               LFS_UNSUPPORTED, "version \"1\"");
        expect_request_refused(json_pack("{s:f, s:s, s:s}", "v", 1.0, "token", "x", "call", "sandbox.ping"),
                               LFS_UNSUPPORTED, "version 1.0");
        /* A library refuses an answer of another version, or none, saying it may have acted. */
        json_t *answers[] = {
                json_pack("{s:o}", "ok", json_object()),
                json_pack("{s:i, s:o}", "v", LFS_PROTO_VERSION + 1, "ok", json_object()),
                json_pack("{s:i, s:{s:s, s:s}}", "v", 0, "error", "code", "Busy", "message", "m"),
        };
        for (size_t i = 0; i < COUNT_OF(answers); i++) {
                lfs_error *err = NULL;
                json_t *result = NULL;
                expect_err(&err, lfs_proto_parse_answer(answers[i], &result, &err), -EPROTO, LFS_UNSUPPORTED,
                           "may have taken effect");
                assert_null(result);
                json_t *item = NULL;
                expect_err(&err, lfs_proto_parse_stream_item(answers[i], &item, &err), -EPROTO,
                           LFS_UNSUPPORTED, ours);
                assert_null(item);
                json_decref(answers[i]);
        }
        /* An answer of our version with neither ok nor error, or both. */
        json_t *odd = json_pack("{s:i}", "v", LFS_PROTO_VERSION);
        lfs_error *err = NULL;
        expect_err(&err, lfs_proto_parse_answer(odd, NULL, &err), -EBADMSG, LFS_FAILED, "neither");
        json_object_set_new(odd, "ok", json_null());
        json_object_set_new(odd, "error", json_object());
        expect_err(&err, lfs_proto_parse_answer(odd, NULL, &err), -EBADMSG, LFS_FAILED, "both");
        json_decref(odd);
}

/* ---- a request's arguments ---- */

static void test_typed_arguments(void **state) {
        (void)state;
        json_t *req = json_pack("{s:s, s:i, s:b, s:s, s:n}", "branch", "main", "pid", 5, "discard", 1,
                                "force", "yes", "cwd");
        lfs_error *err = NULL;
        const char *text = "unset";
        bool flag = false;
        assert_int_equal(lfs_proto_arg_string(req, LFS_CALL_WORKSPACE_STATUS, "branch", &text, &err), 0);
        assert_string_equal(text, "main");
        assert_int_equal(lfs_proto_arg_string(req, LFS_CALL_WORKSPACE_STATUS, "absent", &text, &err), 0);
        assert_null(text);
        assert_int_equal(lfs_proto_arg_bool(req, LFS_CALL_WORKSPACE_UNMOUNT, "discard", false, &flag, &err),
                         0);
        assert_true(flag);
        assert_int_equal(lfs_proto_arg_bool(req, LFS_CALL_WORKSPACE_UNMOUNT, "absent", true, &flag, &err),
                         0);
        assert_true(flag);
        /* A wrong type is never read as absent or false: refused, naming what and why. */
        expect_err(
                &err, lfs_proto_arg_bool(req, LFS_CALL_SANDBOX_CLOSE, "force", false, &flag, &err), -EINVAL,
                LFS_INVALID_INPUT,
                "argument 'force' of sandbox.close must be a boolean (true or false), not a string (\"yes\")");
        expect_err(&err, lfs_proto_arg_string(req, LFS_CALL_WORKSPACE_STATUS, "pid", &text, &err), -EINVAL,
                   LFS_INVALID_INPUT,
                   "argument 'pid' of workspace.status must be a string, not a number (5)");
        expect_err(&err, lfs_proto_arg_string(req, LFS_CALL_WORKSPACE_EXEC, "cwd", &text, &err), -EINVAL,
                   LFS_INVALID_INPUT, "must be a string, not null");
        json_decref(req);
}

/* ---- the library against a daemon of another version ---- */

/* A daemon's socket that answers one request with a fixed line and keeps the request. */
typedef struct fake_daemon {
        int listen_fd;
        const char *answer;
        json_t *request;
} fake_daemon;

static void *fake_daemon_serve(void *arg) {
        fake_daemon *f = arg;
        int fd = accept4(f->listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
                return NULL;
        lfs_frame_reader r;
        lfs_frame_reader_init(&r, fd, LFS_FRAME_MAX_REQUEST, 0);
        lfs_error *err = NULL;
        if (lfs_frame_read(&r, &f->request, &err) > 0)
                send_raw(fd, f->answer, strlen(f->answer));
        lfs_error_free(err);
        lfs_frame_reader_done(&r);
        close(fd);
        return NULL;
}

/* A ping with args (taken) through the library's RPC client (rpc.c) to a daemon answering
 * answer; *ret_request is what the daemon got (NULL: nothing). */
static int call_fake_daemon(json_t *args, const char *answer, json_t **ret_request, lfs_error **err) {
        char dir[] = "/tmp/lfs-proto-XXXXXX";
        assert_non_null(mkdtemp(dir));
        sandbox_record rec = { .project = (char *)"p",
                               .number = 7,
                               .dir_fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC) };
        assert_true(rec.dir_fd >= 0);
        int token = openat(rec.dir_fd, "token", O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        assert_int_equal(write(token, "0123456789abcdef0123456789abcdef", 32), 32);
        close(token);
        fake_daemon f = { .listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), .answer = answer };
        struct sockaddr_un addr = { .sun_family = AF_UNIX };
        snprintf(addr.sun_path, sizeof(addr.sun_path), "%s/control.sock", dir);
        assert_int_equal(bind(f.listen_fd, (struct sockaddr *)&addr, sizeof(addr)), 0);
        assert_int_equal(listen(f.listen_fd, 1), 0);
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, fake_daemon_serve, &f), 0);
        json_t *result = NULL;
        int r = lfs_rpc(&rec, LFS_CALL_SANDBOX_PING, args, &result, err);
        /* A call refused before it connected leaves the daemon in accept: wake it. */
        shutdown(f.listen_fd, SHUT_RDWR);
        pthread_join(t, NULL);
        json_decref(result);
        close(f.listen_fd);
        close(rec.dir_fd);
        assert_int_equal(rm_rf_at(AT_FDCWD, dir), 0);
        *ret_request = f.request;
        return r;
}

static int ping_fake_daemon(const char *answer, json_t **ret_request, lfs_error **err) {
        return call_fake_daemon(json_object(), answer, ret_request, err);
}

/* Arguments json_pack could not make (NULL) are refused before anything is sent. */
static void test_unmade_arguments_are_not_sent(void **state) {
        (void)state;
        json_t *req = NULL;
        lfs_error *err = NULL;
        int r = call_fake_daemon(json_pack("{s:s}", "branch", (const char *)NULL), "{\"v\":1,\"ok\":{}}\n",
                                 &req, &err);
        expect_err(&err, r, -EINVAL, LFS_INVALID_INPUT, "cannot encode the arguments of 'sandbox.ping'");
        assert_null(req);
}

static void test_library_refuses_other_versions(void **state) {
        (void)state;
        /* Our own version goes through, and the request is one of ours. */
        json_t *req = NULL;
        lfs_error *err = NULL;
        char ok[64];
        snprintf(ok, sizeof(ok), "{\"v\":%d,\"ok\":{\"pid\":1}}\n", LFS_PROTO_VERSION);
        assert_msg(ping_fake_daemon(ok, &req, &err) == 0, "%s", err ? err->message : "");
        assert_int_equal(json_integer_value(json_object_get(req, "v")), LFS_PROTO_VERSION);
        assert_string_equal(json_string_value(json_object_get(req, "call")), "sandbox.ping");
        assert_string_equal(json_string_value(json_object_get(req, "token")),
                            "0123456789abcdef0123456789abcdef");
        json_decref(req);
        /* A newer daemon, one before versions, one with a string: Unsupported, -EPROTO. */
        const char *others[] = { "{\"v\":2,\"ok\":{\"pid\":1}}\n", "{\"ok\":{}}\n",
                                 "{\"v\":\"1\",\"error\":{\"code\":\"Dirty\",\"message\":\"m\"}}\n" };
        const char *shown[] = { "version 2 ", "version none", "version \"1\"" };
        for (size_t i = 0; i < COUNT_OF(others); i++) {
                int r = ping_fake_daemon(others[i], &req, &err);
                json_decref(req);
                expect_err(&err, r, -EPROTO, LFS_UNSUPPORTED, shown[i]);
                r = ping_fake_daemon(others[i], &req, &err);
                json_decref(req);
                expect_err(&err, r, -EPROTO, LFS_UNSUPPORTED, "the call may have taken effect");
        }
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_call_table),
                pair_test(test_request_round_trip),
                pair_test(test_answers_round_trip),
                cmocka_unit_test(test_unmade_result_is_failure),
                cmocka_unit_test(test_error_codec),
                pair_test(test_fds_passed),
                pair_test(test_unexpected_fds),
                pair_test(test_truncated_frame),
                pair_test(test_oversized_frame),
                pair_test(test_malformed_frames),
                pair_test(test_short_writes),
                pair_test(test_nonblocking_read),
                cmocka_unit_test(test_request_refusals),
                cmocka_unit_test(test_version_mismatch),
                cmocka_unit_test(test_typed_arguments),
                cmocka_unit_test(test_library_refuses_other_versions),
                cmocka_unit_test(test_unmade_arguments_are_not_sent),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
