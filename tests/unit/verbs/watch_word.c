/* Reads a ring's producer word (offset 0 of a shared file) as the shim does, while
 * another process stores rising values into it: exits 1 if a read ever goes back
 * (a torn or zero-filled store seen), 0 once the writer's last value is read. */
#include <fcntl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc != 3)
		return 2;
	int fd = open(argv[1], O_RDWR);
	if (fd < 0)
		return 2;
	_Atomic uint32_t *w = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (w == MAP_FAILED)
		return 2;
	uint32_t last = (uint32_t)strtoul(argv[2], NULL, 0), prev = 0;
	unsigned long reads = 0;
	atomic_store_explicit(&w[1], 1, memory_order_release); /* ready */
	for (;;) {
		uint32_t v = atomic_load_explicit(&w[0], memory_order_acquire);
		reads++;
		if (v < prev) {
			printf("went back from %u to %u after %lu reads\n", prev, v, reads);
			return 1;
		}
		prev = v;
		if (v == last)
			return 0;
	}
}
