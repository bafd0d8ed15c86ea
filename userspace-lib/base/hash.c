/* SPDX-License-Identifier: MIT */
/* SHA-256 ids through OpenSSL's libcrypto, which uses the CPU's SHA extensions. */
#include <openssl/evp.h>

#include "hash.h"
#include "util.h"

static const EVP_MD *sha256_md(void) {
        static const EVP_MD *md;
        if (!md)
                md = EVP_sha256();
        return md;
}

void lfs_sha256(const void *data, size_t len, lfs_id *ret) {
        unsigned int n = 0;
        if (!EVP_Digest(data, len, ret->bytes, &n, sha256_md(), NULL) || n != LFS_ID_LEN)
                abort(); /* only on allocation failure inside libcrypto */
}

struct lfs_hasher {
        EVP_MD_CTX *ctx;
};

lfs_hasher *lfs_hasher_new(void) {
        lfs_hasher *h = xmalloc(sizeof(*h));
        h->ctx = EVP_MD_CTX_new();
        if (!h->ctx || !EVP_DigestInit_ex(h->ctx, sha256_md(), NULL))
                abort();
        return h;
}

void lfs_hasher_update(lfs_hasher *h, const void *data, size_t len) {
        if (!EVP_DigestUpdate(h->ctx, data, len))
                abort();
}

void lfs_hasher_finish(lfs_hasher *h, lfs_id *ret) {
        unsigned int n = 0;
        if (!EVP_DigestFinal_ex(h->ctx, ret->bytes, &n) || n != LFS_ID_LEN)
                abort();
        EVP_MD_CTX_free(h->ctx);
        free(h);
}

static const char hexdigits[] = "0123456789abcdef";

void lfs_id_to_hex(const lfs_id *id, char ret_hex[LFS_HEX_LEN + 1]) {
        for (size_t i = 0; i < LFS_ID_LEN; i++) {
                ret_hex[2 * i] = hexdigits[id->bytes[i] >> 4];
                ret_hex[2 * i + 1] = hexdigits[id->bytes[i] & 15];
        }
        ret_hex[LFS_HEX_LEN] = 0;
}

static int hexval(char c) {
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        if (c >= 'A' && c <= 'F')
                return c - 'A' + 10;
        return -1;
}

int lfs_id_from_hex(const char *hex, lfs_id *ret) {
        lfs_id id;
        if (strlen(hex) != LFS_HEX_LEN)
                return -EINVAL;
        for (size_t i = 0; i < LFS_ID_LEN; i++) {
                int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);
                if (hi < 0 || lo < 0)
                        return -EINVAL;
                id.bytes[i] = (uint8_t)(hi << 4 | lo);
        }
        *ret = id;
        return 0;
}

void lfs_id_object_path(const lfs_id *id, char ret[LFS_HEX_LEN + 2]) {
        char hex[LFS_HEX_LEN + 1];
        lfs_id_to_hex(id, hex);
        ret[0] = hex[0];
        ret[1] = hex[1];
        ret[2] = '/';
        memcpy(ret + 3, hex + 2, LFS_HEX_LEN - 2 + 1);
}

static size_t idset_slot(const lfs_idset *s, const lfs_id *id) {
        uint64_t h;
        memcpy(&h, id->bytes, sizeof(h)); /* the id is already uniformly distributed */
        size_t i = (size_t)h & (s->cap - 1);
        while (s->used[i] && !lfs_id_eq(&s->slots[i], id))
                i = (i + 1) & (s->cap - 1);
        return i;
}

bool lfs_idset_has(const lfs_idset *s, const lfs_id *id) {
        return s->cap && s->used[idset_slot(s, id)];
}

/* Keeps the table at most half full, so that probing stays short. */
static void idset_grow(lfs_idset *s) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        lfs_idset bigger = { .slots = xmalloc(cap * sizeof(lfs_id)), .used = xcalloc(cap, 1), .cap = cap };
        for (size_t i = 0; i < s->cap; i++) {
                if (!s->used[i])
                        continue;
                size_t j = idset_slot(&bigger, &s->slots[i]);
                bigger.used[j] = 1;
                bigger.slots[j] = s->slots[i];
        }
        bigger.n = s->n;
        free(s->slots);
        free(s->used);
        *s = bigger;
}

bool lfs_idset_add(lfs_idset *s, const lfs_id *id) {
        if ((s->n + 1) * 2 > s->cap)
                idset_grow(s);
        size_t i = idset_slot(s, id);
        if (s->used[i])
                return false;
        s->used[i] = 1;
        s->slots[i] = *id;
        s->n++;
        return true;
}

void lfs_idset_done(lfs_idset *s) {
        free(s->slots);
        free(s->used);
        *s = (lfs_idset){ 0 };
}
