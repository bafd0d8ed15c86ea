/* SPDX-License-Identifier: MIT */
/* SHA-256 ids: long inputs through OpenSSL's libcrypto, which uses the CPU's SHA
 * extensions, loaded with dlopen on the first long input; short ones, and every input
 * where libcrypto cannot be loaded, through a plain implementation of FIPS 180-4 here. */
#include <dlfcn.h>
#include <openssl/evp.h>
#include <pthread.h>

#include "hash.h"
#include "util.h"

/* Inputs up to this many bytes are hashed here, never by libcrypto: the first digest of
 * a process initializes OpenSSL (its configuration file, its providers), 1.7 ms of CPU
 * measured here, which every CLI call that reads a Sandbox's record paid to hash the
 * home's path for the cgroup's name. At this size the speed of the CPU's SHA extensions
 * does not matter. */
#define SHORT_INPUT 256

/* ---- the plain implementation ---- */

static const uint32_t sha256_k[64] = {
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
        0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
        0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
        0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
        0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
        0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
        0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static uint32_t ror(uint32_t x, unsigned n) {
        return x >> n | x << (32 - n);
}

static void sha256_block(uint32_t h[8], const uint8_t b[64]) {
        uint32_t w[64];
        for (int i = 0; i < 16; i++)
                w[i] = (uint32_t)b[4 * i] << 24 | (uint32_t)b[4 * i + 1] << 16 |
                       (uint32_t)b[4 * i + 2] << 8 | b[4 * i + 3];
        for (int i = 16; i < 64; i++) {
                uint32_t s0 = ror(w[i - 15], 7) ^ ror(w[i - 15], 18) ^ w[i - 15] >> 3;
                uint32_t s1 = ror(w[i - 2], 17) ^ ror(w[i - 2], 19) ^ w[i - 2] >> 10;
                w[i] = w[i - 16] + s0 + w[i - 7] + s1;
        }
        uint32_t v[8];
        memcpy(v, h, sizeof(v));
        for (int i = 0; i < 64; i++) {
                uint32_t t1 = v[7] + (ror(v[4], 6) ^ ror(v[4], 11) ^ ror(v[4], 25)) +
                              ((v[4] & v[5]) ^ (~v[4] & v[6])) + sha256_k[i] + w[i];
                uint32_t t2 = (ror(v[0], 2) ^ ror(v[0], 13) ^ ror(v[0], 22)) +
                              ((v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2]));
                memmove(v + 1, v, 7 * sizeof(v[0]));
                v[4] += t1;
                v[0] = t1 + t2;
        }
        for (int i = 0; i < 8; i++)
                h[i] += v[i];
}

/* A digest in progress: the state, the bytes of a block not yet full, the length. */
typedef struct sha256_plain {
        uint32_t h[8];
        uint8_t block[64];
        size_t used;
        uint64_t len;
} sha256_plain;

static void plain_init(sha256_plain *s) {
        *s = (sha256_plain){ .h = { 0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c,
                                    0x1f83d9ab, 0x5be0cd19 } };
}

static void plain_update(sha256_plain *s, const void *data, size_t len) {
        const uint8_t *p = data;
        s->len += len;
        while (len) {
                size_t k = sizeof(s->block) - s->used < len ? sizeof(s->block) - s->used : len;
                memcpy(s->block + s->used, p, k);
                s->used += k;
                p += k;
                len -= k;
                if (s->used == sizeof(s->block)) {
                        sha256_block(s->h, s->block);
                        s->used = 0;
                }
        }
}

/* The message, 0x80, zeros, its length in bits, big-endian, in whole 64-byte blocks. */
static void plain_final(sha256_plain *s, lfs_id *ret) {
        uint64_t bits = s->len * 8;
        uint8_t pad[72] = { 0x80 };
        size_t zeros = (s->used < 56 ? 56 : 120) - s->used;
        for (int i = 0; i < 8; i++)
                pad[zeros + 7 - i] = (uint8_t)(bits >> (8 * i));
        plain_update(s, pad, zeros + 8);
        for (int i = 0; i < 8; i++)
                for (int k = 0; k < 4; k++)
                        ret->bytes[4 * i + k] = (uint8_t)(s->h[i] >> (24 - 8 * k));
}

/* ---- libcrypto, loaded when a long input first needs it ---- */

/* Not linked: loading libcrypto (4.7 MB, its relocations) cost every process its start,
 * 0.7 ms of CPU here, though the CLI's creates, execs, mounts and closes hash nothing
 * long, and neither does a daemon until its first commit. Where it cannot be loaded
 * (or LAYERFS_NO_LIBCRYPTO=1 asks), everything goes through the plain implementation:
 * slower, the same ids. */
#define LIBCRYPTO_STR(v) #v
#define LIBCRYPTO_SONAME(v) "libcrypto.so." LIBCRYPTO_STR(v)

static struct {
        const EVP_MD *md; /* NULL: not loaded */
        __typeof__(&EVP_Digest) digest;
        __typeof__(&EVP_MD_CTX_new) ctx_new;
        __typeof__(&EVP_DigestInit_ex) init;
        __typeof__(&EVP_DigestUpdate) update;
        __typeof__(&EVP_DigestFinal_ex) final;
        __typeof__(&EVP_MD_CTX_free) ctx_free;
} crypto;
static pthread_once_t crypto_once = PTHREAD_ONCE_INIT;

static void crypto_load(void) {
        /* For the tests: the plain implementation for every input. */
        const char *off = getenv("LAYERFS_NO_LIBCRYPTO");
        if (off && !strcmp(off, "1"))
                return;
        void *lib = dlopen(LIBCRYPTO_SONAME(OPENSSL_SHLIB_VERSION), RTLD_NOW | RTLD_LOCAL);
        if (!lib)
                return;
        __typeof__(&EVP_sha256) sha256 = (__typeof__(&EVP_sha256))dlsym(lib, "EVP_sha256");
        crypto.digest = (__typeof__(crypto.digest))dlsym(lib, "EVP_Digest");
        crypto.ctx_new = (__typeof__(crypto.ctx_new))dlsym(lib, "EVP_MD_CTX_new");
        crypto.init = (__typeof__(crypto.init))dlsym(lib, "EVP_DigestInit_ex");
        crypto.update = (__typeof__(crypto.update))dlsym(lib, "EVP_DigestUpdate");
        crypto.final = (__typeof__(crypto.final))dlsym(lib, "EVP_DigestFinal_ex");
        crypto.ctx_free = (__typeof__(crypto.ctx_free))dlsym(lib, "EVP_MD_CTX_free");
        if (sha256 && crypto.digest && crypto.ctx_new && crypto.init && crypto.update && crypto.final &&
            crypto.ctx_free)
                crypto.md = sha256();
}

static bool crypto_loaded(void) {
        pthread_once(&crypto_once, crypto_load);
        return crypto.md != NULL;
}

/* ---- ids ---- */

void lfs_sha256(const void *data, size_t len, lfs_id *ret) {
        unsigned int n = 0;
        if (len > SHORT_INPUT && crypto_loaded()) {
                if (!crypto.digest(data, len, ret->bytes, &n, crypto.md, NULL) || n != LFS_ID_LEN)
                        abort(); /* only on allocation failure inside libcrypto */
                return;
        }
        sha256_plain s;
        plain_init(&s);
        plain_update(&s, data, len);
        plain_final(&s, ret);
}

struct lfs_hasher {
        EVP_MD_CTX *ctx; /* NULL: plain */
        sha256_plain plain;
};

lfs_hasher *lfs_hasher_new_plain(void) {
        lfs_hasher *h = xmalloc(sizeof(*h));
        h->ctx = NULL;
        plain_init(&h->plain);
        return h;
}

lfs_hasher *lfs_hasher_new(void) {
        lfs_hasher *h = lfs_hasher_new_plain();
        if (crypto_loaded() && (!(h->ctx = crypto.ctx_new()) || !crypto.init(h->ctx, crypto.md, NULL)))
                abort();
        return h;
}

void lfs_hasher_update(lfs_hasher *h, const void *data, size_t len) {
        if (!h->ctx)
                plain_update(&h->plain, data, len);
        else if (!crypto.update(h->ctx, data, len))
                abort();
}

void lfs_hasher_finish(lfs_hasher *h, lfs_id *ret) {
        unsigned int n = 0;
        if (!h->ctx) {
                plain_final(&h->plain, ret);
        } else {
                if (!crypto.final(h->ctx, ret->bytes, &n) || n != LFS_ID_LEN)
                        abort();
                crypto.ctx_free(h->ctx);
        }
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
