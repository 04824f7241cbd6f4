/* fuzz_pkey.c: libFuzzer harness for the public keys of src/pkey.c. The
 * first byte of an input chooses the path: even, the rest is a key's text
 * (PEM or DER) for mm_pkey_read; odd, the rest is a JWK's fields kty, crv,
 * n, e, x, y, separated by newlines (the fields after the last one are
 * missing), for mm_pkey_from_jwk. A key that results is asked to verify
 * a signature with every JWS algorithm and with SHA-256 (or none, for
 * EdDSA): no read outside the input, no leak, and every refusal says why.
 * (A key of the fuzzer's that verified its signature would be no finding:
 * any input may be a real key and signature.) */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "pkey.h"

static const char *const algs[] = {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256",
                                   "ES384", "ES512", "EdDSA", "HS256", "none",  ""};

static void check(int ok)
{
    if (!ok) {
        abort();
    }
}

/* key against a signature of each length a JWS algorithm has, made of the
 * input (repeated), over the input. */
static void verify_all(EVP_PKEY *key, const uint8_t *data, size_t size)
{
    static const size_t lengths[] = {0, 64, 96, 114, 132, 256, 384, 512};
    unsigned char sig[512];
    size_t i, j;
    int ed, rv;

    for (i = 0; i < sizeof sig; i++) {
        sig[i] = size ? data[i % size] : 0;
    }
    for (i = 0; i < sizeof algs / sizeof *algs; i++) {
        for (j = 0; j < sizeof lengths / sizeof *lengths; j++) {
            const char *why = NULL;

            rv = mm_pkey_verify_jws(key, algs[i], sig, lengths[j], data, size, &why);
            check(rv == 0 || rv == 1 || (rv == -1 && why != NULL));
        }
    }
    /* CRuby's form: a digest, but none for EdDSA */
    ed = EVP_PKEY_get_base_id(key) == EVP_PKEY_ED25519 || EVP_PKEY_get_base_id(key) == EVP_PKEY_ED448;
    rv =
        mm_pkey_verify(key, ed ? NULL : EVP_sha256(), sig, size < sizeof sig ? size : sizeof sig, data, size);
    check(rv == 0 || rv == 1);
}

/* The JWK fields of text: up to six, separated by '\n'. */
static void read_jwk(const char *text, size_t len, mm_jwk_t *jwk)
{
    mm_jwk_field_t *fields[] = {&jwk->kty, &jwk->crv, &jwk->n, &jwk->e, &jwk->x, &jwk->y};
    size_t i, start = 0, k = 0;

    memset(jwk, 0, sizeof *jwk);
    for (i = 0; i <= len && k < 6; i++) {
        if (i == len || text[i] == '\n') {
            fields[k]->p = text + start;
            fields[k]->n = i - start;
            k++;
            start = i + 1;
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *why = NULL;
    EVP_PKEY *key;
    char *text;
    mm_jwk_t jwk;

    if (size == 0) {
        return 0;
    }
    /* a copy of exactly the text's length: ASan sees a read past it */
    text = malloc(size - 1 ? size - 1 : 1);
    memcpy(text, data + 1, size - 1);
    if (data[0] % 2 == 0) {
        key = mm_pkey_read(text, size - 1, &why);
    } else {
        read_jwk(text, size - 1, &jwk);
        key = mm_pkey_from_jwk(&jwk, &why);
    }
    if (key) {
        verify_all(key, data + 1, size - 1);
        EVP_PKEY_free(key);
    } else {
        check(why != NULL);
    }
    free(text);
    return 0;
}
