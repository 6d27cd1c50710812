#define _GNU_SOURCE 1
#include "CPlatform.h"
#include <sys/prctl.h>

int cplatform_set_non_dumpable(void) { return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0); }

int cplatform_get_dumpable(void) { return prctl(PR_GET_DUMPABLE, 0, 0, 0, 0); }

#include <fcntl.h>
#include <unistd.h>

int cplatform_pipe_cloexec(int fds[2]) { return pipe2(fds, O_CLOEXEC); }

int cplatform_spawn_addchdir(posix_spawn_file_actions_t *actions, const char *path) {
    return posix_spawn_file_actions_addchdir_np(actions, path);
}

int cplatform_spawn_addclosefrom(posix_spawn_file_actions_t *actions, int lowest) {
    return posix_spawn_file_actions_addclosefrom_np(actions, lowest);
}

#include <sys/socket.h>

long cplatform_peer_uid(int fd) {
    struct ucred credentials;
    socklen_t length = sizeof(credentials);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) != 0) return -1;
    return (long)credentials.uid;
}

long cplatform_peer_pid(int fd) {
    struct ucred credentials;
    socklen_t length = sizeof(credentials);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) != 0) return -1;
    return (long)credentials.pid;
}

int cplatform_spawnattr_setsid(posix_spawnattr_t *attributes, short otherFlags) {
    return posix_spawnattr_setflags(attributes, (short)(otherFlags | POSIX_SPAWN_SETSID));
}

#include <sys/ioctl.h>

int cplatform_terminal_size(int fd, int *columns, int *rows) {
    struct winsize size;
    if (ioctl(fd, TIOCGWINSZ, &size) != 0 || size.ws_col == 0) return -1;
    *columns = size.ws_col;
    *rows = size.ws_row;
    return 0;
}
