/*
 * api.h - MORI_API, the mark of every function mori-symm's libraries
 * export.  The libraries are built with -fvisibility=hidden, so a function
 * without it stays inside its library; a public header marks each of its
 * declarations with it.  Defines no other name.
 */
#ifndef MORI_API_H
#define MORI_API_H

#define MORI_API __attribute__((visibility("default")))

#endif
