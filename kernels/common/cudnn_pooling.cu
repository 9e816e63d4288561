#include "kernels/common/cudnn_pooling.h"

#include <memory>

namespace d9m::cudnn {
namespace {

VariantDef variant(const std::string& op, const char* name, cudnnPoolingMode_t mode, Claim claim, PoolingArguments args,
                   DescribePooling describe) {
  return {.op = op, .name = name, .backend = Backend::cuda, .role = Role::vendor, .claim = std::move(claim),
          .run = [args](const KernelArgs& a) {
            auto& st = *static_cast<PoolingState*>(a.state);
            const Scaling k(a.problem.dtype);
            D9M_CUDNN_SUPPORTED(cudnnPoolingBackward(st.handle.get(), st.pool.get(), k.alpha(), st.y_desc.get(), a.inputs[args.y],
                                                     st.y_desc.get(), a.inputs[args.dy], st.x_desc.get(), a.inputs[args.x], k.beta(),
                                                     st.x_desc.get(), a.output));
          },
          .prepare = [mode, describe](const Problem& p, const ExecContext& exec) {
            auto st = std::make_shared<PoolingState>();
            D9M_CUDNN_CHECK(cudnnSetStream(st->handle.get(), static_cast<cudaStream_t>(exec.stream)));
            describe(mode, p, *st);
            return Prepared{st, std::nullopt};
          }};
}

}  // namespace

std::vector<VariantDef> max_pooling_backward_variants(const std::string& op, PoolingArguments args, DescribePooling describe) {
  return {variant(op, "cudnn.max", CUDNN_POOLING_MAX,
                  {Determinism::nondeterministic, ClaimSource::vendor_doc, "CUDNN_POOLING_MAX backward may be nondeterministic when windows overlap"},
                  args, describe),
          variant(op, "cudnn.max_deterministic", CUDNN_POOLING_MAX_DETERMINISTIC,
                  {Determinism::deterministic, ClaimSource::vendor_doc, "CUDNN_POOLING_MAX_DETERMINISTIC is cuDNN's deterministic max-pooling mode"},
                  args, describe)};
}

}  // namespace d9m::cudnn
