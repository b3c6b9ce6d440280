/* Reports the ARMv8.2 half-precision arithmetic features of the CPU it runs on, as the Linux kernel gives them
 * in the auxiliary vector (AT_HWCAP): FPHP (scalar fp16) and ASIMDHP (vector fp16).  Both set is the condition
 * under which MNN's CPU runtime marks a core as fp16-capable and, with precision Low, uses its ARMv8.2 backend.
 * Output, one line: "fphp=<0|1> asimdhp=<0|1>".  Built statically for aarch64 by tests/test_precision_arm.py. */
#include <stdio.h>
#include <sys/auxv.h>

#define BIT_FPHP (1UL << 9)     /* HWCAP_FPHP of the arm64 uapi <asm/hwcap.h> */
#define BIT_ASIMDHP (1UL << 10) /* HWCAP_ASIMDHP */

int main(void) {
    unsigned long caps = getauxval(AT_HWCAP);
    printf("fphp=%d asimdhp=%d\n", (caps & BIT_FPHP) != 0, (caps & BIT_ASIMDHP) != 0);
    return 0;
}
