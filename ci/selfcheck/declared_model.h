// The exact kernel of a declaration: attention computed after exactly the roundings the
// declaration names and nothing else (the loop kernel, rounding where the precision says), taking
// exactly the declared features and contract, with the declared empty-row policy. Whatever attest
// says about it other than CERTIFIED is attest's defect: `attest selfcheck` certifies it across
// drawn declarations.
#pragma once

#include <memory>
#include <string>

#include "attest/kernel.h"

namespace attest {

std::unique_ptr<Kernel> make_declared_model(const Capabilities& declaration, std::string name);

}  // namespace attest
