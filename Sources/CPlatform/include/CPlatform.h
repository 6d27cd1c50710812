// Small POSIX/Linux helpers that Swift cannot call directly (prctl is variadic).
#ifndef OSTACK_CPLATFORM_H
#define OSTACK_CPLATFORM_H

/// prctl(PR_SET_DUMPABLE, 0): no core dumps, no ptrace attach by same-uid processes.
/// Returns 0 on success, -1 with errno set on failure.
int cplatform_set_non_dumpable(void);

/// prctl(PR_GET_DUMPABLE). Returns the dumpable flag (0 or 1) or -1 on error.
int cplatform_get_dumpable(void);

#include <spawn.h>

/// pipe2(fds, O_CLOEXEC): a GNU extension Glibc's Swift overlay does not expose.
int cplatform_pipe_cloexec(int fds[2]);

/// posix_spawn_file_actions_addchdir_np: a GNU extension Glibc's Swift overlay does not expose.
int cplatform_spawn_addchdir(posix_spawn_file_actions_t *actions, const char *path);

/// posix_spawn_file_actions_addclosefrom_np (glibc 2.34+): the child closes every descriptor from
/// `lowest` up, so it inherits none but the ones it was given.
int cplatform_spawn_addclosefrom(posix_spawn_file_actions_t *actions, int lowest);

/// The uid of the process at the other end of a connected Unix socket (SO_PEERCRED; struct ucred
/// needs _GNU_SOURCE). Returns -1 on error.
long cplatform_peer_uid(int fd);

/// The pid of the process that set up the other end of a connected Unix socket (SO_PEERCRED), or -1.
long cplatform_peer_pid(int fd);

/// posix_spawnattr_setflags with POSIX_SPAWN_SETSID added (a GNU extension the overlay lacks), so a
/// spawned daemon starts its own session and survives its parent's terminal.
int cplatform_spawnattr_setsid(posix_spawnattr_t *attributes, short otherFlags);

/// The size of the terminal on `fd` (ioctl TIOCGWINSZ, which Swift cannot call: ioctl is variadic).
/// Returns 0 and sets columns and rows, or -1 when `fd` is not a terminal or reports no size.
int cplatform_terminal_size(int fd, int *columns, int *rows);

#endif
