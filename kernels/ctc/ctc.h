// ctc family: ctc_loss_bwd, the gradient of the CTC loss (Graves et al. 2006) as PyTorch's CUDA
// backward computes it (aten/src/ATen/native/cuda/LossCTC.cu, ctc_loss_backward_gpu_template):
//
//   ctc_loss_bwd(log_probs[T,N,C], targets[N,S] int32, input_lengths[N] int32,
//                target_lengths[N] int32, grad_out[N]) -> grad[T,N,C]
//
// log_probs are log-probabilities over C classes (a log_softmax output; the fill makes them so),
// class 0 is the blank, targets hold labels in [1, C), row n padded past target_lengths[n] (PyTorch's
// 2-D targets form). Sequence n uses time steps t < L = input_lengths[n] and the labels
// l_0 .. l_{U-1}, U = target_lengths[n] >= 1, extended to l' = (0, l_0, 0, l_1, ..., 0, l_{U-1}, 0)
// (positions s in [0, 2U], s odd the labels). reduction='none': loss_n = -log p(l | x_n), and
// grad_out[n] is the upstream gradient of loss_n (all ones for a plain sum of the losses). The
// fill's targets always fit their inputs (nll finite), so zero_infinity changes nothing; targets
// are int32 (PyTorch takes int32 or int64, cuDNN int32).
//
// What the output is: PyTorch's backward returns, for t < L,
//   grad[t,n,c] = (exp(lp[t,n,c]) - gamma_t(c)) grad_out[n],
//   gamma_t(c) = sum over s with l'_s = c of exp(log_alpha[t,s] + log_beta[t,s] + nll_n - lp[t,n,c])
// (Graves' eq. 16: gamma_t(c) is the posterior probability that the path emits c at step t) and 0
// for t >= L. That is not the partial derivative of loss_n in log_probs taken as free variables
// (that is -gamma_t(c) grad_out[n]): it is the gradient in the logits z whose log_softmax is
// log_probs, the term exp(lp) being what log_softmax's backward would subtract; composed with
// log_softmax's backward it passes through unchanged (its sum over c is 0 per step). cuDNN's
// cudnnCTCLoss with CUDNN_LOSS_NORMALIZATION_SOFTMAX, fed log_probs as its activations as PyTorch
// feeds it, returns the same function (softmax(log_probs) = exp(log_probs)) for grad_out = 1.
// suites/unit/ctc_test.cpp checks it against central differences of the loss in the logits.
//
// Order of operations, in T (float for f32, double for f64: PyTorch's CTC dispatches float and
// double only, cuDNN's takes float only), one rounding per operation, as LossCTC.cu writes them:
//   log_add(a, b, c)  = log(exp(a - m) + exp(b - m) + exp(c - m)) + m, the sum left to right,
//                       m = max(a, b, c), or 0 if that is -inf
//   alpha[0, 0] = lp[0, 0], alpha[0, 1] = lp[0, l_0], alpha[0, s > 1] = -inf;
//   alpha[t, s] = log_add(alpha[t-1, s], alpha[t-1, s-1] (s > 0),
//                         alpha[t-1, s-2] (s > 1 and l'_{s-2} != l'_s)) + lp[t, l'_s]
//   beta[L-1, 2U] = lp[L-1, 0], beta[L-1, 2U-1] = lp[L-1, l_{U-1}], beta[L-1, other s] = -inf;
//   beta[t, s]  = log_add(beta[t+1, s], beta[t+1, s+1] (s < 2U),
//                         beta[t+1, s+2] (s < 2U-1 and l'_{s+2} != l'_s)) + lp[t, l'_s]
//   nll = -log_add(alpha[L-1, 2U], alpha[L-1, 2U-1], -inf)   (PyTorch's two-term form: exp(-inf)
//                                                              adds +0, which changes no bits)
//   (a missing operand is -inf, and exp(-inf) = 0). Then PyTorch's large-problem path, the one with
//   atomics (is_large: 2T + 2.4N + 0.2C > 450):
//   grad = exp(lp) for every class;
//   blank: grad[t,n,0] = (exp(lp0) - exp((lse + nll) - lp0)) grad_out[n], lse = at::logsumexp over
//          the even s of (alpha[t,s] + beta[t,s]): m = the maximum (0 if it is infinite), then
//          log(sum of exp(x_s - m)) + m, the sum in ascending s (ATen's reduction order is its
//          own, fixed for a shape; d9m writes ascending s down);
//   labels: grad[t,n,c] = exp(lp) grad_out[n], then for each target position j with l_j = c,
//          grad[t,n,c] += (-exp(((alpha[t,2j+1] + beta[t,2j+1]) + nll) - lp[t,n,c])) grad_out[n].
// exp and log are elementary.h's exp_nonpositive and log_positive (+ - * / and bits only, the same
// on the host and the device; within 2 and 1 ulp of the true values on the tested ranges), so the
// CPU and CUDA variants of one order claim the same bits. Every exp argument is <= 0 (a log of a
// probability) but for rounding, which leaves it far below ln2/2, where exp_nonpositive holds.
// PyTorch calls std::exp and std::log (CUDA's expf/logf or exp/log); d9m's results therefore agree
// with PyTorch's and cuDNN's within tolerance, not bit for bit.
//
// What races: alpha, beta and nll are deterministic everywhere (each state is one expression of
// the previous row). Only the collection of the label terms can race: PyTorch's
// ctc_loss_backward_collect_nonblank_gpu_kernel has a thread per (n, j) that walks t < L and adds
// its term into grad[t,n,l_j] with gpuAtomicAddNoReturn, so a class that occurs at several
// positions of one target (a repeated label, not only adjacent repeats) collects its terms in the
// scheduler's order. PyTorch's deterministic mode raises for ctc_loss's CUDA backward
// (alertNotDeterministic("ctc_loss_backward_gpu")), whichever path a problem takes; its
// small-problem path (ctc_loss_backward_collect_gpu_kernel, a thread per (t, n) adding in log
// space over s) has no atomics.
//
// Variants: the serial reference writes each (t, n) row (every class's base value, then the label
// terms in ascending j) on one thread; cpu.ordered and cuda.ordered do the same with a task or a
// thread per row (the small path's decomposition, the large path's arithmetic): cpu.serial's bits.
// cpu.atomic and cuda.atomic initialise the rows, then add the label terms with atomics: from a
// task per (n, t, class, lane of alternate occurrences) (ctc_cpu.cpp says why), and from a thread
// per (n, j) walking t in PyTorch's block shape.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/common/half.h"
#include "kernels/common/hd.h"
#include "kernels/common/elementary.h"

namespace d9m::ctc {

struct Geometry {
  std::int64_t time = 1, batch = 1, classes = 2, max_target = 1;  // T, N, C, S
  bool varying = false;  // lengths drawn per sequence (else every L = T and every U = S)

  D9M_HD std::int64_t states() const { return 2 * max_target + 1; }
};

// The op's inputs, as every variant reads them (T = float or double).
template <class T>
struct Inputs {
  Geometry g;
  const T* log_probs;
  const std::int32_t* targets;
  const std::int32_t* input_lengths;
  const std::int32_t* target_lengths;
  const T* grad_out;

  D9M_HD std::int64_t at(std::int64_t t, std::int64_t n, std::int64_t c) const { return (t * g.batch + n) * g.classes + c; }
  D9M_HD T lp(std::int64_t t, std::int64_t n, std::int64_t c) const { return log_probs[at(t, n, c)]; }
  D9M_HD std::int64_t length(std::int64_t n) const { return input_lengths[n]; }
  D9M_HD std::int64_t target_length(std::int64_t n) const { return target_lengths[n]; }
  D9M_HD std::int64_t label(std::int64_t n, std::int64_t j) const { return targets[n * g.max_target + j]; }
  // l'_s: the blank at even s, label s/2 at odd s.
  D9M_HD std::int64_t extended(std::int64_t n, std::int64_t s) const { return s % 2 == 0 ? 0 : label(n, s / 2); }
};

// What the recursions leave per sequence: alpha and beta [N, T, 2S+1] (states past 2U and steps
// past L are never written nor read) and nll [N].
template <class T>
struct Lattice {
  T* alpha;
  T* beta;
  T* nll;
};

template <class T>
D9M_HD inline std::int64_t state_at(const Geometry& g, std::int64_t n, std::int64_t t, std::int64_t s) {
  return (n * g.time + t) * g.states() + s;
}

// log(exp(a - m) + exp(b - m) + exp(c - m)) + m, m the maximum found as LossCTC.cu finds it.
template <class T>
D9M_HD inline T log_add(T a, T b, T c) {
  T m = a;
  if (b > m) m = b;
  if (c > m) m = c;
  if (m == negative_infinity<T>()) m = T(0);
  return log_positive(exp_nonpositive(a - m) + exp_nonpositive(b - m) + exp_nonpositive(c - m)) + m;
}

// alpha[t, s] of sequence n from row t - 1 (already written for t > 0).
template <class T>
D9M_HD inline T alpha_state(const Inputs<T>& in, const T* alpha, std::int64_t n, std::int64_t t, std::int64_t s) {
  const T ninf = negative_infinity<T>();
  if (t == 0) return s == 0 ? in.lp(0, n, 0) : s == 1 ? in.lp(0, n, in.label(n, 0)) : ninf;
  const T* prev = alpha + state_at<T>(in.g, n, t - 1, 0);
  const std::int64_t c = in.extended(n, s);
  const T a2 = s > 0 ? prev[s - 1] : ninf;
  const T a3 = s > 1 && in.extended(n, s - 2) != c ? prev[s - 2] : ninf;
  return log_add(prev[s], a2, a3) + in.lp(t, n, c);
}

// beta[t, s] of sequence n from row t + 1 (already written for t < L - 1).
template <class T>
D9M_HD inline T beta_state(const Inputs<T>& in, const T* beta, std::int64_t n, std::int64_t t, std::int64_t s) {
  const T ninf = negative_infinity<T>();
  const std::int64_t last = in.length(n) - 1, u2 = 2 * in.target_length(n);
  if (t == last) return s == u2 ? in.lp(last, n, 0) : s == u2 - 1 ? in.lp(last, n, in.label(n, in.target_length(n) - 1)) : ninf;
  const T* next = beta + state_at<T>(in.g, n, t + 1, 0);
  const std::int64_t c = in.extended(n, s);
  const T b2 = s < u2 ? next[s + 1] : ninf;
  const T b3 = s < u2 - 1 && in.extended(n, s + 2) != c ? next[s + 2] : ninf;
  return log_add(next[s], b2, b3) + in.lp(t, n, c);
}

template <class T>
D9M_HD inline T nll_of(const Inputs<T>& in, const T* alpha, std::int64_t n) {
  const T* last = alpha + state_at<T>(in.g, n, in.length(n) - 1, 0);
  const std::int64_t u2 = 2 * in.target_length(n);
  return -log_add(last[u2], last[u2 - 1], negative_infinity<T>());
}

// The recursions of sequence n on one thread: alpha forward, beta backward, then nll.
template <class T>
D9M_HD inline void sequence_lattice(const Inputs<T>& in, const Lattice<T>& lat, std::int64_t n) {
  const std::int64_t steps = in.length(n), states = 2 * in.target_length(n) + 1;
  for (std::int64_t t = 0; t < steps; ++t)
    for (std::int64_t s = 0; s < states; ++s) lat.alpha[state_at<T>(in.g, n, t, s)] = alpha_state(in, lat.alpha, n, t, s);
  for (std::int64_t t = steps - 1; t >= 0; --t)
    for (std::int64_t s = 0; s < states; ++s) lat.beta[state_at<T>(in.g, n, t, s)] = beta_state(in, lat.beta, n, t, s);
  lat.nll[n] = nll_of(in, lat.alpha, n);
}

// The label term of target position j at step t: (-exp(((alpha + beta) + nll) - lp)) grad_out.
template <class T>
D9M_HD inline T label_term(const Inputs<T>& in, const Lattice<T>& lat, std::int64_t n, std::int64_t t, std::int64_t j) {
  const std::int64_t at = state_at<T>(in.g, n, t, 2 * j + 1);
  const T x = ((lat.alpha[at] + lat.beta[at]) + lat.nll[n]) - in.lp(t, n, in.label(n, j));
  return mul(-exp_nonpositive(x), in.grad_out[n]);
}

// Row (t, n) before the label terms: exp(lp) grad_out for every label class, the blank's full
// gradient, and 0 past the sequence's length.
template <class T>
D9M_HD inline void init_row(const Inputs<T>& in, const Lattice<T>& lat, std::int64_t n, std::int64_t t, T* out) {
  T* row = out + in.at(t, n, 0);
  if (t >= in.length(n)) {
    for (std::int64_t c = 0; c < in.g.classes; ++c) row[c] = T(0);
    return;
  }
  const T gr = in.grad_out[n];
  for (std::int64_t c = 1; c < in.g.classes; ++c) row[c] = mul(exp_nonpositive(in.lp(t, n, c)), gr);
  // The blank: at::logsumexp over the even states, then exp((lse + nll) - lp0).
  const T* a = lat.alpha + state_at<T>(in.g, n, t, 0);
  const T* b = lat.beta + state_at<T>(in.g, n, t, 0);
  const std::int64_t u2 = 2 * in.target_length(n);
  T m = negative_infinity<T>();
  for (std::int64_t s = 0; s <= u2; s += 2)
    if (a[s] + b[s] > m) m = a[s] + b[s];
  if (m == negative_infinity<T>() || m == -negative_infinity<T>()) m = T(0);
  T sum = T(0);
  for (std::int64_t s = 0; s <= u2; s += 2) sum = sum + exp_nonpositive((a[s] + b[s]) - m);
  const T lse = log_positive(sum) + m, lp0 = in.lp(t, n, 0);
  row[0] = mul(exp_nonpositive(lp0) - exp_nonpositive((lse + lat.nll[n]) - lp0), gr);
}

// Row (t, n) whole: init_row, then the label terms in ascending j (the reference order).
template <class T>
D9M_HD inline void gather_row(const Inputs<T>& in, const Lattice<T>& lat, std::int64_t n, std::int64_t t, T* out) {
  init_row(in, lat, n, t, out);
  if (t >= in.length(n)) return;
  T* row = out + in.at(t, n, 0);
  for (std::int64_t j = 0; j < in.target_length(n); ++j) {
    const std::int64_t c = in.label(n, j);
    row[c] = add(row[c], label_term(in, lat, n, t, j));
  }
}

// The label terms in scatter form (accumulate.h): source (n, j) emits its term for t < L into
// grad[t, n, l_j], the work of one thread of PyTorch's nonblank kernel.
template <class T>
struct LabelTerms {
  Inputs<T> in;
  Lattice<T> lat;

  D9M_HD std::size_t sources() const { return static_cast<std::size_t>(in.g.batch * in.g.max_target); }

  template <class Emit>
  D9M_HD void operator()(std::size_t src, Emit& emit) const {
    const auto n = static_cast<std::int64_t>(src) / in.g.max_target, j = static_cast<std::int64_t>(src) % in.g.max_target;
    if (j >= in.target_length(n)) return;
    const std::int64_t c = in.label(n, j);
    for (std::int64_t t = 0; t < in.length(n); ++t) emit(static_cast<std::size_t>(in.at(t, n, c)), label_term(in, lat, n, t, j));
  }
};


}  // namespace d9m::ctc
