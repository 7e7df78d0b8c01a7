"""More native linear algebra (src/ops/linalg.c): complex Cholesky, LU,
triangular solves, det/slogdet/inv/solve (vector and broadcast right-hand
sides too), lu_unpack's partial unpackings; Householder QR (geqrf,
linalg_qr, linalg_householder_product, ormqr); Jacobi eigh (_linalg_eigh)
and SVD (_linalg_svd, float64 / complex128). Results agree with the CPU
without the fallback; eigenvectors and singular vectors agree up to their
sign (phase), which is all that defines them."""

import pytest
import torch

import tpuc


def single(dtype):
    return dtype in (torch.float32, torch.complex64)


def tol(dtype):
    return dict(rtol=1e-4, atol=1e-4) if single(dtype) else \
        dict(rtol=1e-9, atol=1e-9)


def to_dev(xs):
    return [x.to("tpu") if isinstance(x, torch.Tensor) else x for x in xs]


def check(fn, *args, native=True, dtype=torch.float64, post=None):
    cpu = fn(*args)
    tpuc.fallback_reset()
    dev = fn(*to_dev(args))
    if native:
        assert not tpuc.fallback_report()
    cpu = cpu if isinstance(cpu, (tuple, list)) else (cpu,)
    dev = dev if isinstance(dev, (tuple, list)) else (dev,)
    dev = [d.cpu() for d in dev]
    if post is not None:
        cpu, dev = post(cpu), post(dev)
    assert len(cpu) == len(dev)
    for c, d in zip(cpu, dev):
        assert c.dtype == d.dtype and c.shape == d.shape
        if c.dtype.is_floating_point or c.dtype.is_complex:
            torch.testing.assert_close(d, c, **tol(dtype))
        else:
            assert torch.equal(d, c)


def hpd(*shape, dtype):
    m = torch.randn(*shape, dtype=dtype)
    n = shape[-1]
    return m @ m.mH + n * torch.eye(n, dtype=dtype)


# ------------------------------- complex --------------------------------


@pytest.mark.parametrize("dtype", [torch.complex128])
def test_complex_cholesky_family(dtype):
    a = hpd(2, 4, 4, dtype=dtype)
    b = torch.randn(2, 4, 3, dtype=dtype)
    for upper in (False, True):
        check(lambda x: torch.linalg.cholesky_ex(x, upper=upper), a,
              dtype=dtype)
        check(lambda x: torch.cholesky(x, upper), a, dtype=dtype)
        f = torch.linalg.cholesky(a, upper=upper)
        check(lambda bb, ff: torch.cholesky_solve(bb, ff, upper), b, f,
              dtype=dtype)
        check(lambda ff: torch.cholesky_inverse(ff, upper), f, dtype=dtype)
    # the CPU's cholesky_inverse is exactly Hermitian
    inv = torch.cholesky_inverse(torch.linalg.cholesky(a).to("tpu")).cpu()
    assert torch.equal(inv, inv.mH)
    # the imaginary part of the diagonal is not read
    c = a + 0.5j * torch.eye(4, dtype=dtype)
    check(torch.linalg.cholesky, c, dtype=dtype)


@pytest.mark.parametrize("dtype", [torch.complex64])
def test_complex_cholesky_not_positive_definite(dtype):
    a = torch.tensor([[1, 2], [2, 1]], dtype=dtype)
    check(torch.linalg.cholesky_ex, a, native=False, dtype=dtype)
    with pytest.raises(RuntimeError) as cpu:
        torch.linalg.cholesky(a)
    with pytest.raises(RuntimeError) as dev:
        torch.linalg.cholesky(a.to("tpu"))
    assert str(dev.value) == str(cpu.value)


@pytest.mark.parametrize("dtype", [torch.complex64])
def test_complex_triangular(dtype):
    a = torch.randn(2, 4, 4, dtype=dtype) + 4 * torch.eye(4, dtype=dtype)
    b = torch.randn(2, 4, 3, dtype=dtype)
    bl = torch.randn(2, 3, 4, dtype=dtype)
    for upper in (False, True):
        for unit in (False, upper):
            check(lambda x, y: torch.linalg.solve_triangular(
                x, y, upper=upper, unitriangular=unit), a, b, dtype=dtype)
            check(lambda x, y: torch.linalg.solve_triangular(
                x, y, upper=upper, left=False, unitriangular=unit), a, bl,
                dtype=dtype)
            for tr in (False, True):
                check(lambda y, x: torch.triangular_solve(y, x, upper, tr,
                                                          unit),
                      b, a, dtype=dtype)


@pytest.mark.parametrize("dtype", [torch.complex128])
def test_complex_lu_family(dtype):
    a = torch.randn(2, 5, 5, dtype=dtype)
    check(torch.linalg.lu_factor_ex, a, dtype=dtype)
    check(torch.linalg.lu, a, dtype=dtype)
    check(torch.linalg.lu, torch.randn(3, 5, dtype=dtype), dtype=dtype)
    lu, piv = torch.linalg.lu_factor(a)
    check(torch.lu_unpack, lu, piv, dtype=dtype)
    b = torch.randn(2, 5, 2, dtype=dtype)
    bl = torch.randn(2, 2, 5, dtype=dtype)
    for adj in (False, True):
        check(lambda x, p, y: torch.linalg.lu_solve(x, p, y, adjoint=adj),
              lu, piv, b, dtype=dtype)
        check(lambda x, p, y: torch.linalg.lu_solve(x, p, y, left=False,
                                                    adjoint=adj),
              lu, piv, bl, dtype=dtype)
    check(torch.linalg.det, a, dtype=dtype)
    check(torch.linalg.slogdet, a, dtype=dtype)
    check(torch.logdet, hpd(3, 3, dtype=dtype), dtype=dtype)
    check(torch.linalg.inv_ex, a, dtype=dtype)
    check(torch.linalg.inv, a.mT, dtype=dtype)  # not contiguous
    check(torch.linalg.solve_ex, a, b, dtype=dtype)


@pytest.mark.parametrize("dtype", [torch.complex64])
def test_complex_singular_goes_to_cpu(dtype):
    a = torch.zeros(3, 3, dtype=dtype)
    with pytest.raises(RuntimeError) as cpu:
        torch.linalg.inv(a)
    with pytest.raises(RuntimeError) as dev:
        torch.linalg.inv(a.to("tpu"))
    assert str(dev.value) == str(cpu.value)
    check(torch.linalg.det, a, native=False, dtype=dtype)


# ------------------------------ solve_ex --------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.complex128])
def test_solve_vectors_and_broadcasting(dtype):
    a = torch.randn(2, 4, 4, dtype=dtype) + 3 * torch.eye(4, dtype=dtype)
    check(torch.linalg.solve, a, torch.randn(2, 4, dtype=dtype), dtype=dtype)
    check(torch.linalg.solve, a, torch.randn(4, dtype=dtype), dtype=dtype)
    check(torch.linalg.solve, a, torch.randn(3, 1, 4, 2, dtype=dtype),
          dtype=dtype)
    check(torch.linalg.solve, a[0], torch.randn(3, 4, 2, dtype=dtype),
          dtype=dtype)
    check(lambda x, y: torch.linalg.solve(x, y, left=False), a,
          torch.randn(2, 3, 4, dtype=dtype), dtype=dtype)
    check(torch.linalg.solve_ex, a, torch.randn(2, 4, 3, dtype=dtype),
          dtype=dtype)
    check(torch.linalg.solve, torch.randn(0, 3, 3, dtype=dtype),
          torch.randn(0, 3, dtype=dtype), dtype=dtype)
    out = torch.empty(0, dtype=dtype, device="tpu")
    torch.linalg.solve(a.to("tpu"), torch.ones(2, 4, dtype=dtype,
                                               device="tpu"), out=out)
    torch.testing.assert_close(
        out.cpu(), torch.linalg.solve(a, torch.ones(2, 4, dtype=dtype)),
        **tol(dtype))


def test_solve_errors_match_cpu():
    a = torch.randn(2, 3, 3, dtype=torch.float64)
    for b, kw in ((torch.randn(3, dtype=torch.float64), dict(left=False)),
                  (torch.randn(2, 4, 2, dtype=torch.float64), {}),
                  (torch.randn(3, 3, dtype=torch.float32), {})):
        with pytest.raises(RuntimeError) as cpu:
            torch.linalg.solve(a, b, **kw)
        with pytest.raises(RuntimeError) as dev:
            torch.linalg.solve(a.to("tpu"), b.to("tpu"), **kw)
        assert str(dev.value) == str(cpu.value)


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex64])
def test_lu_unpack_partial(dtype):
    lu, piv = torch.linalg.lu_factor(torch.randn(2, 4, 3, dtype=dtype))
    for data, pivots in ((True, False), (False, True), (False, False)):
        check(lambda x, p: torch.lu_unpack(x, p, data, pivots), lu, piv,
              dtype=dtype)


# --------------------------------- QR -----------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.complex128])
@pytest.mark.parametrize("shape", [(2, 5, 3), (3, 5), (0, 3), (2, 3, 0)])
def test_qr(dtype, shape):
    a = torch.randn(*shape, dtype=dtype)
    for mode in ("reduced", "complete", "r"):
        check(lambda x: torch.linalg.qr(x, mode=mode), a, dtype=dtype)
    check(torch.geqrf, a, dtype=dtype)


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex64])
def test_householder_product_and_ormqr(dtype):
    a = torch.randn(2, 5, 3, dtype=dtype)
    f, tau = torch.geqrf(a)
    check(torch.linalg.householder_product, f, tau, dtype=dtype)
    check(torch.linalg.householder_product, f, tau[..., :2], dtype=dtype)
    # arbitrary reflectors (not from a QR)
    check(torch.linalg.householder_product, torch.randn(4, 4, dtype=dtype),
          torch.randn(3, dtype=dtype), dtype=dtype)
    for tr in (False, True):
        check(lambda x, t, y: torch.ormqr(x, t, y, transpose=tr), f, tau,
              torch.randn(2, 5, 4, dtype=dtype), dtype=dtype)
        check(lambda x, t, y: torch.ormqr(x, t, y, left=False, transpose=tr),
              f, tau, torch.randn(2, 4, 5, dtype=dtype), dtype=dtype)


def test_qr_out_and_noncontiguous():
    a = torch.randn(5, 4, dtype=torch.float64)
    q = torch.empty(0, dtype=torch.float64, device="tpu")
    r = torch.empty(0, dtype=torch.float64, device="tpu")
    tpuc.fallback_reset()
    torch.linalg.qr(a.to("tpu"), out=(q, r))
    assert not tpuc.fallback_report()
    qe, re = torch.linalg.qr(a)
    torch.testing.assert_close(q.cpu(), qe)
    torch.testing.assert_close(r.cpu(), re)
    check(torch.linalg.qr, a.mT)


# -------------------------------- eigh ----------------------------------


def abs_vectors(out):
    return [out[0], out[1].abs()]


@pytest.mark.parametrize("dtype,uplo", [(torch.float32, "L"),
                                        (torch.float64, "U"),
                                        (torch.complex128, "L"),
                                        (torch.complex128, "U")])
def test_eigh(dtype, uplo):
    a = torch.randn(3, 5, 5, dtype=dtype)  # only one triangle is read
    check(lambda x: torch.linalg.eigh(x, UPLO=uplo), a, dtype=dtype,
          post=abs_vectors)
    check(lambda x: torch.linalg.eigvalsh(x, UPLO=uplo), a, dtype=dtype)
    w, v = torch.linalg.eigh(a.to("tpu"), UPLO=uplo)
    h = torch.linalg.eigh(a, UPLO=uplo)
    herm = (a.tril() + a.tril(-1).mH) if uplo == "L" else \
        (a.triu() + a.triu(1).mH)
    herm = herm - 1j * herm.diagonal(dim1=-2, dim2=-1).imag.diag_embed() \
        if dtype.is_complex else herm
    v = v.cpu()
    torch.testing.assert_close(v @ torch.diag_embed(w.cpu()).to(dtype) @ v.mH,
                               herm, **tol(dtype))
    assert h[0].shape == w.shape


@pytest.mark.parametrize("shape", [(0, 4, 4), (2, 0, 0), (1, 1), (2, 2)])
def test_eigh_small(shape):
    check(torch.linalg.eigh, torch.randn(*shape, dtype=torch.complex128),
          dtype=torch.complex128, post=abs_vectors)


def test_eigh_fallbacks():
    # complex64 and large matrices run on the CPU; NaN inputs too
    check(torch.linalg.eigh, torch.randn(4, 4, dtype=torch.complex64),
          native=False, dtype=torch.complex64, post=abs_vectors)
    check(torch.linalg.eigvalsh, torch.randn(40, 40, dtype=torch.float64),
          native=False)
    a = torch.randn(3, 3, dtype=torch.float64)
    a[1, 1] = float("nan")
    with pytest.raises(RuntimeError) as cpu:
        torch.linalg.eigvalsh(a)
    with pytest.raises(RuntimeError) as dev:
        torch.linalg.eigvalsh(a.to("tpu"))
    assert str(dev.value) == str(cpu.value)


# --------------------------------- SVD ----------------------------------


def uniform_svd(out):
    u, s, vh = out
    k = s.shape[-1]
    return [u[..., :k].abs(), s, vh[..., :k, :].abs()]


@pytest.mark.parametrize("dtype,shape", [
    (torch.float64, (2, 5, 3)), (torch.complex128, (3, 5)),
    (torch.float64, (4, 1)), (torch.complex128, (1, 1)),
    (torch.float64, (0, 3, 3)), (torch.float64, (3, 0)),
    (torch.complex128, (0, 3))])
def test_svd(dtype, shape):
    a = torch.randn(*shape, dtype=dtype)
    for full in (False, True):
        check(lambda x: torch.linalg.svd(x, full_matrices=full), a,
              dtype=dtype, post=uniform_svd)
        u, s, vh = [t.cpu() for t in torch.linalg.svd(a.to("tpu"),
                                                      full_matrices=full)]
        ue, _, vhe = torch.linalg.svd(a, full_matrices=full)
        assert u.shape == ue.shape and vh.shape == vhe.shape
        eye_u = torch.eye(u.shape[-1], dtype=dtype)
        eye_v = torch.eye(vh.shape[-2], dtype=dtype)
        torch.testing.assert_close(u.mH @ u, eye_u.expand_as(u.mH @ u))
        torch.testing.assert_close(vh @ vh.mH, eye_v.expand_as(vh @ vh.mH))
    check(torch.linalg.svdvals, a, dtype=dtype)


def test_svd_rank_deficient_and_composites():
    a = torch.randn(5, 2, dtype=torch.float64)
    a = a @ a.mT  # rank 2
    u, s, vh = [t.cpu() for t in torch.linalg.svd(a.to("tpu"))]
    torch.testing.assert_close(u.mT @ u, torch.eye(5, dtype=torch.float64))
    torch.testing.assert_close(u * s @ vh, a)
    z = torch.zeros(3, 4, dtype=torch.complex128)
    u, s, vh = [t.cpu() for t in torch.linalg.svd(z.to("tpu"))]
    assert torch.equal(s, torch.zeros(3, dtype=torch.float64))
    torch.testing.assert_close(u.mH @ u, torch.eye(3, dtype=z.dtype))
    torch.testing.assert_close(vh @ vh.mH, torch.eye(4, dtype=z.dtype))
    b = torch.randn(2, 4, 3, dtype=torch.float64)
    check(torch.linalg.pinv, b)
    check(torch.linalg.matrix_rank, a)
    check(torch.linalg.cond, b)
    check(lambda x: torch.linalg.matrix_norm(x, "nuc"), b)
    out = (torch.empty(0, dtype=torch.float64, device="tpu"),
           torch.empty(0, dtype=torch.float64, device="tpu"),
           torch.empty(0, dtype=torch.float64, device="tpu"))
    tpuc.fallback_reset()
    torch.linalg.svd(b.to("tpu"), full_matrices=False, out=out)
    assert not tpuc.fallback_report()
    torch.testing.assert_close(out[1].cpu(), torch.linalg.svdvals(b))


def test_svd_single_precision_on_cpu():
    check(torch.linalg.svdvals, torch.randn(3, 3), native=False,
          dtype=torch.float32)
