/* store_file.c */
