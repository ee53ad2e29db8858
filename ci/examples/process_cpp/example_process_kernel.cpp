// A kernel served as a separate program over the attest process protocol. Any kernel (a CUDA
// or Triton kernel behind a host program, say) fills an attest_kernel_v2 descriptor (a
// version-1 attest_kernel works too) and calls serve(); here the descriptor is the C example's.
// Certify it with
//   attest certify --kernel-cmd ./example_process_kernel
#include "attest/abi/process_kernel_server.hpp"
#include "attest/attest_abi.h"

extern "C" const attest_kernel_v2* attest_kernel_entry(void);

int main() { return attest::protocol::serve(attest_kernel_entry()); }
