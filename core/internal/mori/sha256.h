/*
 * sha256.h - SHA-256 (FIPS 180-4), for names that must not alias: the file
 * store names a key too long for a file name after its digest.
 */
#ifndef MORI_SHA256_H
#define MORI_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define MORI_SHA256_SIZE 32

void mori__sha256(const void *data, size_t len, uint8_t digest[MORI_SHA256_SIZE]);

#endif
