/*
 * The test cluster's pause program: the process that holds a Pod's namespaces. It reaps
 * orphans it inherits as PID 1 and exits on SIGINT or SIGTERM. Built static by
 * scripts/kubernetes/build.sh into a one-file image (no registry can be reached here).
 * Must never: exit on its own, or leave a zombie it could reap.
 */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void stop(int sig) {
	(void)sig;
	_exit(0);
}

static void reap(int sig) {
	(void)sig;
	while (waitpid(-1, NULL, WNOHANG) > 0) {
	}
}

int main(void) {
	struct sigaction sa = {0};
	sa.sa_handler = stop;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sa.sa_handler = reap;
	sa.sa_flags = SA_NOCLDSTOP;
	sigaction(SIGCHLD, &sa, NULL);
	for (;;) pause();
	return 1;
}
