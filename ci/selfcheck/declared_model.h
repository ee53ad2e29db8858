// The exact kernel of a declaration: attention computed after exactly the roundings the
// declaration names and nothing else (the loop kernel, rounding where the precision says), taking
// exactly the declared features and contract, with the declared empty-row policy; its decode evicts
// as the declared cache policy says and takes the declared block table (model_decode.h); each
// declared path is served under its name by differently tiled, equally exact code; its backward
// is the loop kernel's float32 one (a backward is declared in float32 only). Whatever attest
// says about it other than CERTIFIED is attest's defect: `attest selfcheck` certifies it across
// drawn declarations.
#pragma once

#include <memory>
#include <string>

#include "attest/kernels/kernel.h"

namespace attest {

std::unique_ptr<Kernel> make_declared_model(const Capabilities& declaration, std::string name);

}  // namespace attest
