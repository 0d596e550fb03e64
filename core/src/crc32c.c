/* crc32c.c */
