/*
 * tty-drain: waits until everything written to the console has left the
 * UART (tcdrain()), so that the guest's init can power off right after
 * without cutting its last lines (the verdict). The tty layer returns from
 * write() before the UART has sent the bytes, and how long the UART takes
 * depends on when the guest's vCPUs get to run on a busy host.
 */
#include <fcntl.h>
#include <stdio.h>
#include <termios.h>
#include <unistd.h>

int main(void)
{
    int fd = open("/dev/console", O_WRONLY | O_NOCTTY);

    if (fd < 0 || tcdrain(fd)) {
        perror("tty-drain");
        return 1;
    }
    return 0;
}
