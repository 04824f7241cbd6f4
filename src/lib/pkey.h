/* pkey.h: public keys for signature verification (pkey.c): read from PEM
 * or DER, made from a JWK's fields, and checked against JWS signatures
 * (RFC 7515, 7518, 8037). Needs libcrypto alone, not httpd nor mruby, so
 * that its fuzzing harness (fuzz/fuzz_pkey.c) calls it as it is. */
#ifndef MM_PKEY_H
#define MM_PKEY_H

#include <stddef.h>

#include <openssl/evp.h>

/* The most bytes of text mm_pkey_read reads: keys are a few KB. */
#define MM_PKEY_TEXT_MAX (64 * 1024)

/* A key from PEM or DER: a public key (SubjectPublicKeyInfo, or PKCS#1
 * "RSA PUBLIC KEY") or a private key that is not encrypted (its public
 * half is used). NULL with *why set (static text) when it is none, and
 * libcrypto's error queue emptied. */
EVP_PKEY *mm_pkey_read(const char *text, size_t len, const char **why);

/* One field of a JWK: its text (base64url for the key's numbers), or
 * NULL when the JWK has none. */
typedef struct {
    const char *p;
    size_t n;
} mm_jwk_field_t;

/* The fields of a JWK (RFC 7517, 7518, 8037) a public key is made of. */
typedef struct {
    mm_jwk_field_t kty, crv, n, e, x, y;
} mm_jwk_t;

/* A public key from a JWK: "RSA" (n, e), "EC" (crv P-256, P-384 or P-521,
 * x, y: a point of the curve) or "OKP" (crv Ed25519 or Ed448, x). NULL
 * with *why set when the fields make no such key. */
EVP_PKEY *mm_pkey_from_jwk(const mm_jwk_t *jwk, const char **why);

/* Whether sig is key's signature of data by the JWS algorithm alg
 * ("RS256", "PS384", "ES256", "EdDSA", ...): 1 yes, 0 no. -1 with *why set
 * when alg cannot be checked with this key: an unknown algorithm (HS256,
 * "none"), a key of another type or curve, an RSA key under 2048 bits. */
int mm_pkey_verify_jws(EVP_PKEY *key, const char *alg, const unsigned char *sig, size_t sig_len,
                       const unsigned char *data, size_t data_len, const char **why);

/* Whether sig is key's signature of data with the digest md (NULL for
 * EdDSA), in the key's usual form (PKCS#1 v1.5 for RSA, DER for ECDSA):
 * 1 yes, 0 no. */
int mm_pkey_verify(EVP_PKEY *key, const EVP_MD *md, const unsigned char *sig, size_t sig_len,
                   const unsigned char *data, size_t data_len);

#endif
