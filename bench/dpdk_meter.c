/* DPDK's rte_meter srTCM (RFC 2697) as a peer for isolane's meters: one meter per tenant, one
 * profile shared, packets read from a file and metered colour-blind in packet time.
 *
 *   dpdk_meter TRAFFIC METERS CIR CBS EBS ROUNDS SHIFT_NS
 *
 * TRAFFIC holds one 16-byte record per packet: meter index (u32), bytes (u32), time in ns (u64),
 * little-endian, as bench/dpdk_meter.py writes it. Every meter starts full at time 0; round r
 * meters every packet at its time + r x SHIFT_NS (the next stretch of the same traffic, as
 * bench/test_qos_bench.py does). The output is the best round's ns per packet and the colours
 * of all rounds: "ns_per_packet=... green=... yellow=... red=...".
 *
 * rte_meter converts rates to periods of the clock its caller passes, at rte_get_tsc_hz() ticks
 * a second (an EAL function, its only dependency outside libc). Defining it here as 1e9 makes
 * the meters run on the packets' nanosecond timestamps, as isolane's do, without EAL. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <rte_meter.h>

struct packet {
	uint32_t meter;
	uint32_t bytes;
	uint64_t time_ns;
};

uint64_t rte_get_tsc_hz(void)
{
	return 1000000000ULL;
}

static double seconds_now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static struct packet *read_traffic(const char *path, size_t *count)
{
	FILE *f = fopen(path, "rb");
	if (f == NULL || fseek(f, 0, SEEK_END) != 0)
		return NULL;
	long size = ftell(f);
	rewind(f);
	*count = (size_t)size / sizeof(struct packet);
	struct packet *packets = malloc(*count * sizeof(struct packet));
	if (packets == NULL || fread(packets, sizeof(struct packet), *count, f) != *count)
		return NULL;
	fclose(f);
	return packets;
}

int main(int argc, char **argv)
{
	if (argc != 8) {
		fprintf(stderr, "usage: %s TRAFFIC METERS CIR CBS EBS ROUNDS SHIFT_NS\n", argv[0]);
		return 2;
	}
	size_t count = 0;
	struct packet *packets = read_traffic(argv[1], &count);
	size_t meters = strtoull(argv[2], NULL, 10);
	struct rte_meter_srtcm_params params = {
		.cir = strtoull(argv[3], NULL, 10),
		.cbs = strtoull(argv[4], NULL, 10),
		.ebs = strtoull(argv[5], NULL, 10),
	};
	int rounds = atoi(argv[6]);
	uint64_t shift_ns = strtoull(argv[7], NULL, 10);
	struct rte_meter_srtcm_profile profile;
	struct rte_meter_srtcm *state = calloc(meters, sizeof(struct rte_meter_srtcm));
	if (packets == NULL || state == NULL) {
		fprintf(stderr, "cannot read %s or allocate %zu meters\n", argv[1], meters);
		return 1;
	}
	if (rte_meter_srtcm_profile_config(&profile, &params) != 0) {
		fprintf(stderr, "rte_meter_srtcm_profile_config refused the parameters\n");
		return 1;
	}
	for (size_t m = 0; m < meters; m++) {
		rte_meter_srtcm_config(&state[m], &profile);
		state[m].time = 0; /* config reads the CPU's clock; packet time starts at 0 */
	}
	double best = 1e300;
	uint64_t colors[3] = {0, 0, 0};
	for (int round = 0; round < rounds; round++) {
		uint64_t offset = (uint64_t)round * shift_ns;
		double start = seconds_now();
		for (size_t i = 0; i < count; i++) {
			const struct packet *p = &packets[i];
			colors[rte_meter_srtcm_color_blind_check(&state[p->meter], &profile, p->time_ns + offset, p->bytes)]++;
		}
		double elapsed = seconds_now() - start;
		if (elapsed < best)
			best = elapsed;
	}
	printf("ns_per_packet=%.3f green=%" PRIu64 " yellow=%" PRIu64 " red=%" PRIu64 "\n", best * 1e9 / (double)count, colors[0],
	       colors[1], colors[2]);
	return 0;
}
