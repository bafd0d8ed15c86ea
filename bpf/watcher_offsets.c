/* SPDX-License-Identifier: MIT */
/*
 * The offsets of the kernel struct members the watcher's programs read (watcher.h), from
 * the running kernel's BTF (/sys/kernel/btf/vmlinux), read with no libbpf: a walk of its
 * type section for two structs by name.
 *
 * Reading the 5-6 MB BTF costs a few milliseconds, so the first Sandbox after a boot
 * writes the offsets to /run/layerfs/bpf-offsets (keyed by boot id and kernel release)
 * and every later one reads them back.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/btf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "bpf_watcher.h"
#include "util.h"

#define VMLINUX_BTF "/sys/kernel/btf/vmlinux"
#define OFFSETS_DIR "/run/layerfs"
#define OFFSETS_FILE OFFSETS_DIR "/bpf-offsets"

/* "<boot id> <kernel release>": what the cached offsets are valid for. */
static void kernel_key(char *buf, size_t cap) {
        char boot[64];
        lfs_boot_id_read(boot, sizeof(boot));
        struct utsname u;
        if (uname(&u) < 0)
                u.release[0] = 0;
        snprintf(buf, cap, "%s %s", boot, u.release);
}

/* The bytes that follow a type of this kind in the type section (linux/btf.h). */
static int type_extra(const struct btf_type *t, size_t *ret) {
        size_t vlen = BTF_INFO_VLEN(t->info);
        switch (BTF_INFO_KIND(t->info)) {
        case BTF_KIND_INT:
        case BTF_KIND_VAR:
        case BTF_KIND_DECL_TAG:
                *ret = 4;
                return 0;
        case BTF_KIND_PTR:
        case BTF_KIND_FWD:
        case BTF_KIND_TYPEDEF:
        case BTF_KIND_VOLATILE:
        case BTF_KIND_CONST:
        case BTF_KIND_RESTRICT:
        case BTF_KIND_FUNC:
        case BTF_KIND_FLOAT:
        case BTF_KIND_TYPE_TAG:
                *ret = 0;
                return 0;
        case BTF_KIND_ARRAY:
                *ret = sizeof(struct btf_array);
                return 0;
        case BTF_KIND_STRUCT:
        case BTF_KIND_UNION:
                *ret = vlen * sizeof(struct btf_member);
                return 0;
        case BTF_KIND_ENUM:
                *ret = vlen * sizeof(struct btf_enum);
                return 0;
        case BTF_KIND_FUNC_PROTO:
                *ret = vlen * sizeof(struct btf_param);
                return 0;
        case BTF_KIND_DATASEC:
                *ret = vlen * sizeof(struct btf_var_secinfo);
                return 0;
        case BTF_KIND_ENUM64:
                *ret = vlen * sizeof(struct btf_enum64);
                return 0;
        default:
                return -EPROTO; /* a kind newer than this build: its size is unknown */
        }
}

struct btf_blob {
        const char *types, *strings;
        size_t types_len, strings_len;
};

static const char *btf_string(const struct btf_blob *b, uint32_t off) {
        return off < b->strings_len ? b->strings + off : "";
}

/* The byte offset of member in the struct named type. */
static int member_offset(const struct btf_blob *b, const char *type, const char *member, uint32_t *ret) {
        for (size_t at = 0; at + sizeof(struct btf_type) <= b->types_len;) {
                const struct btf_type *t = (const void *)(b->types + at);
                size_t extra;
                int r = type_extra(t, &extra);
                if (r < 0)
                        return r;
                if (at + sizeof(*t) + extra > b->types_len)
                        return -EPROTO;
                if (BTF_INFO_KIND(t->info) == BTF_KIND_STRUCT && !strcmp(btf_string(b, t->name_off), type)) {
                        const struct btf_member *m = (const void *)(t + 1);
                        for (size_t i = 0; i < BTF_INFO_VLEN(t->info); i++)
                                if (!strcmp(btf_string(b, m[i].name_off), member)) {
                                        uint32_t bits = BTF_INFO_KFLAG(t->info)
                                                                ? BTF_MEMBER_BIT_OFFSET(m[i].offset)
                                                                : m[i].offset;
                                        *ret = bits / 8;
                                        return 0;
                                }
                        return -ENOENT;
                }
                at += sizeof(*t) + extra;
        }
        return -ENOENT;
}

static int read_whole(const char *path, char **ret, size_t *ret_len) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0)
                return -errno;
        _cleanup_free_ char *buf = malloc((size_t)st.st_size);
        if (!buf)
                return -ENOMEM;
        ssize_t n = lfs_pread_full(fd, buf, (size_t)st.st_size, 0);
        if (n < 0)
                return (int)n;
        *ret_len = (size_t)n;
        *ret = TAKE_PTR(buf);
        return 0;
}

static int offsets_from_btf(struct watch_offsets *o) {
        _cleanup_free_ char *raw = NULL;
        size_t len = 0;
        int r = read_whole(VMLINUX_BTF, &raw, &len);
        if (r < 0)
                return r;
        const struct btf_header *h = (const void *)raw;
        if (len < sizeof(*h) || h->magic != BTF_MAGIC || h->hdr_len > len ||
            (size_t)h->type_off + h->type_len > len - h->hdr_len ||
            (size_t)h->str_off + h->str_len > len - h->hdr_len)
                return -EPROTO;
        const char *base = raw + h->hdr_len;
        struct btf_blob b = { .types = base + h->type_off,
                              .types_len = h->type_len,
                              .strings = base + h->str_off,
                              .strings_len = h->str_len };
        if (b.strings_len == 0 || b.strings[b.strings_len - 1] != 0)
                return -EPROTO;
        if ((r = member_offset(&b, "task_struct", "pid", &o->task_pid)) < 0 ||
            (r = member_offset(&b, "task_struct", "tgid", &o->task_tgid)) < 0 ||
            (r = member_offset(&b, "task_struct", "exit_code", &o->task_exit_code)) < 0 ||
            (r = member_offset(&b, "task_struct", "real_parent", &o->task_real_parent)) < 0 ||
            (r = member_offset(&b, "task_struct", "signal", &o->task_signal)) < 0 ||
            (r = member_offset(&b, "signal_struct", "live", &o->signal_live)) < 0)
                return r;
        return 0;
}

/* An offset into task_struct or signal_struct, as BTF gives them: below either's size. */
#define OFFSET_MAX (64 * 1024)

/* The cache is trusted only as root wrote it (root's, writable by no one else) and only
 * with offsets that can be a member's: a wrong one would make the watcher read other
 * fields (wrong pids or exit codes, exits missed), never the kernel's memory at large. */
static int offsets_from_cache(const char *key, struct watch_offsets *o) {
        FILE *f = fopen(OFFSETS_FILE, "re");
        if (!f)
                return -errno;
        struct stat st;
        char line[256] = "";
        int r = -ESTALE;
        if (fstat(fileno(f), &st) == 0 && st.st_uid == 0 && !(st.st_mode & 022) && S_ISREG(st.st_mode) &&
            fgets(line, sizeof(line), f) && !strncmp(line, key, strlen(key)) && line[strlen(key)] == '\n' &&
            fscanf(f, "%u %u %u %u %u %u", &o->task_pid, &o->task_tgid, &o->task_exit_code,
                   &o->task_real_parent, &o->task_signal, &o->signal_live) == 6 &&
            o->task_pid < OFFSET_MAX && o->task_tgid < OFFSET_MAX && o->task_exit_code < OFFSET_MAX &&
            o->task_real_parent < OFFSET_MAX && o->task_signal < OFFSET_MAX && o->signal_live < OFFSET_MAX)
                r = 0;
        fclose(f);
        return r;
}

/* Written whole or not at all (a temporary file renamed), by root only. */
static void offsets_to_cache(const char *key, const struct watch_offsets *o) {
        char tmp[64];
        snprintf(tmp, sizeof(tmp), OFFSETS_FILE ".%d", (int)getpid());
        if (mkdir(OFFSETS_DIR, 0700) < 0 && errno != EEXIST)
                return;
        /* 0600 whatever the umask: offsets_from_cache trusts no file others may write. */
        int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
        FILE *f = fd < 0 ? NULL : fdopen(fd, "w");
        if (!f) {
                if (fd >= 0)
                        close(fd);
                return;
        }
        fprintf(f, "%s\n%u %u %u %u %u %u\n", key, o->task_pid, o->task_tgid, o->task_exit_code,
                o->task_real_parent, o->task_signal, o->signal_live);
        if (fclose(f) != 0 || rename(tmp, OFFSETS_FILE) < 0)
                unlink(tmp);
}

int lfs_watch_offsets(struct watch_offsets *ret) {
        char key[192];
        struct watch_offsets o = { 0 };
        kernel_key(key, sizeof(key));
        /* Without a boot id, the key cannot tell this boot's offsets from another's. */
        bool keyed = key[0] != ' ';
        if (keyed && offsets_from_cache(key, &o) == 0) {
                *ret = o;
                return 0;
        }
        int r = offsets_from_btf(&o);
        if (r < 0)
                return r;
        if (keyed)
                offsets_to_cache(key, &o);
        *ret = o;
        return 0;
}
