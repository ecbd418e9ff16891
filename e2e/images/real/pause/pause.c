/* capd-pause: the pod sandbox process of the capd-rs real node image (registry.k8s.io/pause:3.9
 * there). It holds the pod's namespaces: sleeps until a signal arrives, reaps any child it
 * inherits (it is PID 1 of the pod when the pod shares its PID namespace), and exits 0 on
 * SIGINT or SIGTERM. Built statically with gcc by e2e/images/real/build.sh. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void on_stop(int sig) {
  (void)sig;
  _exit(0);
}

static void on_child(int sig) {
  (void)sig;
  int saved = errno;
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
  errno = saved;
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "-v") == 0) {
    puts("capd-pause 3.9");
    return 0;
  }
  if (getpid() != 1) {
    fprintf(stderr, "capd-pause: warning: not PID 1\n");
  }
  struct sigaction stop = {.sa_handler = on_stop};
  sigemptyset(&stop.sa_mask);
  if (sigaction(SIGINT, &stop, NULL) < 0 || sigaction(SIGTERM, &stop, NULL) < 0) {
    perror("capd-pause: sigaction");
    return 1;
  }
  struct sigaction child = {.sa_handler = on_child, .sa_flags = SA_NOCLDSTOP | SA_RESTART};
  sigemptyset(&child.sa_mask);
  if (sigaction(SIGCHLD, &child, NULL) < 0) {
    perror("capd-pause: sigaction");
    return 1;
  }
  for (;;) {
    pause();
  }
  return 42;
}
