/* crypto.h: what the Ruby bindings of libcrypto share (crypto.c): the
 * digests by name, fetched once per process; hex; errors with libcrypto's
 * reason. Digest, OpenSSL::HMAC, SecureRandom and OpenSSL::PKey use it. */
#ifndef MM_CRYPTO_H
#define MM_CRYPTO_H

#include <stddef.h>

#include <mruby.h>
#include <openssl/evp.h>

/* The digests scripts can name, in the order of mm_crypto_md's table. */
typedef enum {
    MM_MD_MD5,
    MM_MD_SHA1,
    MM_MD_SHA224,
    MM_MD_SHA256,
    MM_MD_SHA384,
    MM_MD_SHA512,
    MM_MD_COUNT
} mm_md_e;

/* The digest, fetched from libcrypto's default provider the first time a
 * thread of the process asks, then kept until the process exits (shared
 * by every thread: an EVP_MD is immutable). Raises RuntimeError if
 * libcrypto has no such digest. */
const EVP_MD *mm_crypto_md(mrb_state *mrb, mm_md_e which);

/* Its name as CRuby's OpenSSL spells it ("SHA256"). */
const char *mm_crypto_md_name(mm_md_e which);

/* The digest a script names: a String ("SHA256", "sha256", "SHA-256"), or
 * a class of Digest (Digest::SHA256) or one of its objects. Raises
 * ArgumentError for an unknown name, TypeError for anything else. */
mm_md_e mm_crypto_md_arg(mrb_state *mrb, mrb_value name);

/* The class of Digest that stands for which (Digest::SHA256): its index is
 * kept in the class (rb_digest.c). -1 if c is none. */
int mm_crypto_md_of_class(mrb_state *mrb, struct RClass *c);

/* The digest of data[0..n) (out has room for EVP_MAX_MD_SIZE); its length. */
unsigned int mm_crypto_digest(mrb_state *mrb, mm_md_e which, const void *data, size_t n, unsigned char *out);

/* bytes as a String of lower-case hex, or of strict Base64. */
mrb_value mm_crypto_hex(mrb_state *mrb, const unsigned char *bytes, size_t n);
mrb_value mm_crypto_base64(mrb_state *mrb, const unsigned char *bytes, size_t n);

/* The three forms of a digest's value (digest, hexdigest, base64digest). */
typedef enum { MM_AS_BINARY, MM_AS_HEX, MM_AS_BASE64 } mm_form_e;
mrb_value mm_crypto_formatted(mrb_state *mrb, mm_form_e form, const unsigned char *bytes, size_t n);

/* Raises cls with "what: " and libcrypto's reason (the last error of the
 * thread's queue, which it empties), or what alone if it has none. */
void mm_crypto_raise(mrb_state *mrb, struct RClass *cls, const char *what);

/* OpenSSL::OpenSSLError (rb_openssl.c defines it first). */
struct RClass *mm_crypto_error(mrb_state *mrb);

#endif
