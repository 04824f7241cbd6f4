/* pkey.c: public keys and JWS signature checks on libcrypto (see pkey.h).
 * Every step is libcrypto's: decoding, the key's construction and checks,
 * the verification; this file only chooses and converts. */

#include <string.h>

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/decoder.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/param_build.h>
#include <openssl/rsa.h>

#include "base64.h"
#include "pkey.h"

/* No passphrase: an encrypted key is refused, never asked for on a tty. */
static int no_passphrase(char *pass, size_t size, size_t *len, const OSSL_PARAM params[], void *arg)
{
    return 0;
}

EVP_PKEY *mm_pkey_read(const char *text, size_t len, const char **why)
{
    EVP_PKEY *key = NULL;
    OSSL_DECODER_CTX *dctx;
    const unsigned char *p = (const unsigned char *)text;
    size_t left = len;

    if (len > MM_PKEY_TEXT_MAX) {
        *why = "longer than 64 KB, no key is";
        return NULL;
    }
    dctx = OSSL_DECODER_CTX_new_for_pkey(&key, NULL, NULL, NULL, 0, NULL, NULL);
    if (dctx && OSSL_DECODER_CTX_set_passphrase_cb(dctx, no_passphrase, NULL) &&
        OSSL_DECODER_from_data(dctx, &p, &left)) {
        OSSL_DECODER_CTX_free(dctx);
        ERR_clear_error();
        return key;
    }
    OSSL_DECODER_CTX_free(dctx);
    EVP_PKEY_free(key);
    ERR_clear_error();
    *why = "not a key in PEM or DER (or an encrypted one)";
    return NULL;
}

/* A JWK's base64url field decoded into buf (room for n / 4 * 3 + 3); its
 * length, or -1. Padding is not allowed in a JWK, nor are '+' and '/'. */
static long field(const mm_jwk_field_t *f, unsigned char *buf)
{
    const char *why;
    size_t where, i;

    for (i = 0; i < f->n; i++) {
        if (f->p[i] == '=' || f->p[i] == '+' || f->p[i] == '/') {
            return -1;
        }
    }
    return mm_base64_decode_strict(f->p, f->n, buf, 1, &why, &where);
}

static int is(const mm_jwk_field_t *f, const char *s)
{
    return f->p && f->n == strlen(s) && memcmp(f->p, s, f->n) == 0;
}

/* The key in params, of type name, if it passes libcrypto's check of a
 * public key (an EC point on its curve, an RSA modulus and exponent that
 * make sense). */
static EVP_PKEY *from_params(const char *name, OSSL_PARAM *params, const char **why)
{
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(NULL, name, NULL), *check = NULL;
    EVP_PKEY *key = NULL;

    if (ctx == NULL || EVP_PKEY_fromdata_init(ctx) <= 0 ||
        EVP_PKEY_fromdata(ctx, &key, EVP_PKEY_PUBLIC_KEY, params) <= 0) {
        *why = "not a valid public key (a point off its curve, a bad modulus or exponent)";
    } else if ((check = EVP_PKEY_CTX_new_from_pkey(NULL, key, NULL)) == NULL ||
               EVP_PKEY_public_check(check) != 1) {
        *why = "not a valid public key (a point off its curve, a bad modulus or exponent)";
        EVP_PKEY_free(key);
        key = NULL;
    }
    EVP_PKEY_CTX_free(check);
    EVP_PKEY_CTX_free(ctx);
    ERR_clear_error();
    return key;
}

static EVP_PKEY *rsa_from_jwk(const mm_jwk_t *jwk, unsigned char *buf, const char **why)
{
    OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new();
    OSSL_PARAM *params = NULL;
    BIGNUM *n = NULL, *e = NULL;
    EVP_PKEY *key = NULL;
    long len;

    *why = "an RSA JWK needs \"n\" and \"e\" in base64url";
    if (bld && jwk->n.p && jwk->e.p && (len = field(&jwk->n, buf)) > 0 &&
        (n = BN_bin2bn(buf, (int)len, NULL)) && (len = field(&jwk->e, buf)) > 0 &&
        (e = BN_bin2bn(buf, (int)len, NULL)) && OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_N, n) &&
        OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_E, e) && (params = OSSL_PARAM_BLD_to_param(bld))) {
        key = from_params("RSA", params, why);
    }
    OSSL_PARAM_free(params);
    OSSL_PARAM_BLD_free(bld);
    BN_free(n);
    BN_free(e);
    return key;
}

/* The curves of JWS: name in JOSE, in libcrypto, size of a coordinate. */
static const struct {
    const char *jose, *group;
    size_t size;
} curves[] = {
    {"P-256", "prime256v1", 32},
    {"P-384", "secp384r1", 48},
    {"P-521", "secp521r1", 66},
};

static EVP_PKEY *ec_from_jwk(const mm_jwk_t *jwk, unsigned char *buf, const char **why)
{
    unsigned char point[1 + 2 * 66];
    OSSL_PARAM params[3];
    size_t i;
    long len;

    for (i = 0; i < sizeof curves / sizeof curves[0]; i++) {
        size_t size = curves[i].size;

        if (!is(&jwk->crv, curves[i].jose)) {
            continue;
        }
        /* the uncompressed point: 4, then x and y of the curve's size
         * (RFC 7518 wants them at that size; some encoders drop leading
         * zero bytes, which are put back) */
        *why = "an EC JWK needs \"x\" and \"y\" in base64url, not longer than its curve's size";
        memset(point, 0, sizeof point);
        if (!jwk->x.p || !jwk->y.p || (len = field(&jwk->x, buf)) <= 0 || (size_t)len > size) {
            return NULL;
        }
        memcpy(point + 1 + size - (size_t)len, buf, (size_t)len);
        if ((len = field(&jwk->y, buf)) <= 0 || (size_t)len > size) {
            return NULL;
        }
        memcpy(point + 1 + 2 * size - (size_t)len, buf, (size_t)len);
        point[0] = 4;
        params[0] = OSSL_PARAM_construct_utf8_string(OSSL_PKEY_PARAM_GROUP_NAME, (char *)curves[i].group, 0);
        params[1] = OSSL_PARAM_construct_octet_string(OSSL_PKEY_PARAM_PUB_KEY, point, 1 + 2 * size);
        params[2] = OSSL_PARAM_construct_end();
        return from_params("EC", params, why);
    }
    *why = "an EC JWK's \"crv\" must be P-256, P-384 or P-521";
    return NULL;
}

static EVP_PKEY *okp_from_jwk(const mm_jwk_t *jwk, unsigned char *buf, const char **why)
{
    const char *name = is(&jwk->crv, "Ed25519") ? "ED25519" : is(&jwk->crv, "Ed448") ? "ED448" : NULL;
    size_t size = name && name[2] == '2' ? 32 : 57;
    EVP_PKEY *key;

    if (name == NULL) {
        *why = "an OKP JWK's \"crv\" must be Ed25519 or Ed448";
        return NULL;
    }
    if (!jwk->x.p || field(&jwk->x, buf) != (long)size) {
        *why = "an OKP JWK needs \"x\" of its curve's size in base64url";
        return NULL;
    }
    key = EVP_PKEY_new_raw_public_key_ex(NULL, name, NULL, buf, size);
    ERR_clear_error();
    if (key == NULL) {
        *why = "libcrypto refused the key";
    }
    return key;
}

EVP_PKEY *mm_pkey_from_jwk(const mm_jwk_t *jwk, const char **why)
{
    unsigned char *buf;
    EVP_PKEY *key = NULL;
    size_t most = 0;

    /* room for the longest field decoded */
    most = jwk->n.n > most ? jwk->n.n : most;
    most = jwk->e.n > most ? jwk->e.n : most;
    most = jwk->x.n > most ? jwk->x.n : most;
    most = jwk->y.n > most ? jwk->y.n : most;
    if (most > MM_PKEY_TEXT_MAX) {
        *why = "a field longer than 64 KB, no key's is";
        return NULL;
    }
    buf = OPENSSL_malloc(most / 4 * 3 + 3);
    if (buf == NULL) {
        *why = "out of memory";
        return NULL;
    }
    if (is(&jwk->kty, "RSA")) {
        key = rsa_from_jwk(jwk, buf, why);
    } else if (is(&jwk->kty, "EC")) {
        key = ec_from_jwk(jwk, buf, why);
    } else if (is(&jwk->kty, "OKP")) {
        key = okp_from_jwk(jwk, buf, why);
    } else {
        *why = "a JWK's \"kty\" must be RSA, EC or OKP (a public key)";
    }
    OPENSSL_free(buf);
    return key;
}

int mm_pkey_verify(EVP_PKEY *key, const EVP_MD *md, const unsigned char *sig, size_t sig_len,
                   const unsigned char *data, size_t data_len)
{
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    int ok = ctx && EVP_DigestVerifyInit(ctx, NULL, md, NULL, key) == 1 &&
             EVP_DigestVerify(ctx, sig, sig_len, data, data_len) == 1;

    EVP_MD_CTX_free(ctx);
    ERR_clear_error();
    return ok;
}

/* The algorithms of JWS with public keys (RFC 7518 section 3, RFC 8037). */
typedef enum { PKCS1, PSS, ECDSA, EDDSA } scheme_e;

static const struct {
    const char *alg;
    scheme_e scheme;
    const char *md;    /* libcrypto's name; NULL for EdDSA */
    const char *group; /* ECDSA's curve */
    size_t half;       /* ECDSA: the size of r and of s */
} algs[] = {
    {"RS256", PKCS1, "SHA256", NULL, 0},
    {"RS384", PKCS1, "SHA384", NULL, 0},
    {"RS512", PKCS1, "SHA512", NULL, 0},
    {"PS256", PSS, "SHA256", NULL, 0},
    {"PS384", PSS, "SHA384", NULL, 0},
    {"PS512", PSS, "SHA512", NULL, 0},
    {"ES256", ECDSA, "SHA256", "prime256v1", 32},
    {"ES384", ECDSA, "SHA384", "secp384r1", 48},
    {"ES512", ECDSA, "SHA512", "secp521r1", 66},
    {"EdDSA", EDDSA, NULL, NULL, 0},
};

/* JWS's ECDSA signature (r and s, each of the curve's size) as the DER
 * libcrypto verifies; its length, 0 if sig has the wrong size. *der is
 * libcrypto's memory (OPENSSL_free). */
static int ecdsa_der(const unsigned char *sig, size_t sig_len, size_t half, unsigned char **der)
{
    ECDSA_SIG *es;
    BIGNUM *r, *s;
    int len = 0;

    if (sig_len != 2 * half || (es = ECDSA_SIG_new()) == NULL) {
        return 0;
    }
    r = BN_bin2bn(sig, (int)half, NULL);
    s = BN_bin2bn(sig + half, (int)half, NULL);
    if (r && s && ECDSA_SIG_set0(es, r, s)) {
        len = i2d_ECDSA_SIG(es, der);
    } else {
        BN_free(r);
        BN_free(s);
    }
    ECDSA_SIG_free(es);
    return len > 0 ? len : 0;
}

static int key_is(EVP_PKEY *key, scheme_e scheme, const char *group)
{
    char name[64];

    switch (scheme) {
    case PKCS1:
    case PSS:
        return EVP_PKEY_is_a(key, "RSA");
    case ECDSA:
        return EVP_PKEY_is_a(key, "EC") &&
               EVP_PKEY_get_utf8_string_param(key, OSSL_PKEY_PARAM_GROUP_NAME, name, sizeof name, NULL) &&
               strcmp(name, group) == 0;
    default:
        return EVP_PKEY_is_a(key, "ED25519") || EVP_PKEY_is_a(key, "ED448");
    }
}

int mm_pkey_verify_jws(EVP_PKEY *key, const char *alg, const unsigned char *sig, size_t sig_len,
                       const unsigned char *data, size_t data_len, const char **why)
{
    EVP_MD_CTX *ctx;
    EVP_PKEY_CTX *pctx = NULL;
    unsigned char *der = NULL;
    size_t i;
    int ok, len;

    for (i = 0; i < sizeof algs / sizeof algs[0] && strcmp(algs[i].alg, alg) != 0; i++) {
    }
    if (i == sizeof algs / sizeof algs[0]) {
        *why = "not an algorithm of public keys (RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, "
               "ES512, EdDSA)";
        return -1;
    }
    if (!key_is(key, algs[i].scheme, algs[i].group)) {
        *why = "the key is not of the algorithm's type (or curve)";
        ERR_clear_error();
        return -1;
    }
    if (algs[i].scheme <= PSS && EVP_PKEY_get_bits(key) < 2048) {
        *why = "an RSA key under 2048 bits (RFC 7518 refuses them)";
        return -1;
    }
    if (algs[i].scheme == PKCS1 || algs[i].scheme == EDDSA) {
        return mm_pkey_verify(key, algs[i].md ? EVP_get_digestbyname(algs[i].md) : NULL, sig, sig_len, data,
                              data_len);
    }
    if (algs[i].scheme == ECDSA) {
        if ((len = ecdsa_der(sig, sig_len, algs[i].half, &der)) == 0) {
            return 0;
        }
        ok = mm_pkey_verify(key, EVP_get_digestbyname(algs[i].md), der, (size_t)len, data, data_len);
        OPENSSL_free(der);
        return ok;
    }
    /* PSS: the salt as long as the digest, MGF1 with the same digest */
    ctx = EVP_MD_CTX_new();
    ok = ctx && EVP_DigestVerifyInit_ex(ctx, &pctx, algs[i].md, NULL, NULL, key, NULL) == 1 &&
         EVP_PKEY_CTX_set_rsa_padding(pctx, RSA_PKCS1_PSS_PADDING) > 0 &&
         EVP_PKEY_CTX_set_rsa_pss_saltlen(pctx, RSA_PSS_SALTLEN_DIGEST) > 0 &&
         EVP_PKEY_CTX_set_rsa_mgf1_md_name(pctx, algs[i].md, NULL) > 0 &&
         EVP_DigestVerify(ctx, sig, sig_len, data, data_len) == 1;
    EVP_MD_CTX_free(ctx);
    ERR_clear_error();
    return ok;
}
