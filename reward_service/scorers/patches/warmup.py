"""Warming ANTLR's prediction cache (the DFA) in the zygote, so every worker starts warm.

latex2sympy2_extended's parser (pure-Python ANTLR) predicts each decision from a DFA that it
builds lazily: the first time a decision meets a new lookahead shape, ANTLR simulates the
grammar's ATN (closures over configuration sets) and stores the result. On this grammar that
simulation costs ~10-80 ms; a cached decision costs microseconds. Measured on the corpus
(6326 rows after a 200-row warm-up, one fresh interpreter, the workers' scorer): 70 strings
reached ANTLR and took 0.50-0.72 s, 69% of it in the 7 slowest (80 ms for ``x^2+33x-33``),
and the same 70 strings took 0.04-0.06 s once the DFA had seen them: cold prediction was ~90%
of all ANTLR time, and ~20% of the scorer's.

The DFA is class-level state (``PSParser.decisionsToDFA``, ``PSLexer.decisionsToDFA``), so a
process inherits it through ``fork``. The zygote parses :data:`LATEX_SHAPES` before it
reports ready; every worker it forks (the first ones, spares, replacements of a killed or
recycled worker) starts with those decisions cached, instead of paying for them again in
each worker.

The DFA only caches predictions: a warm parser returns the same tree as a cold one
(``tests/test_warmup.py`` compares trees cold and warm on every LaTeX string the corpus and
the golden suite extract). The shapes below are written by hand to cover common final
answers (numbers, fractions, roots, polynomials, equations, inequalities, intervals, sets,
tuples, functions, units, matrices); none is taken from the benchmark corpus.
"""

from __future__ import annotations

import time

__all__ = ["LATEX_SHAPES", "dfa_states", "warm_parser"]

#: final-answer shapes, one per line (written as a model writes them, before normalisation)
LATEX_SHAPES: tuple[str, ...] = tuple(s for s in r"""
7
-3
0
3.14
0.5
-0.25
1,000
10^{5}
2\times 10^{3}
1.5\times10^{-4}
\frac{1}{3}
-\frac{3}{4}
\dfrac{5}{6}
\tfrac12
\frac12
\frac{\sqrt{3}}{2}
\frac{a+b}{c}
3\frac{1}{2}
\frac{x^2-1}{x+1}
\frac{7}{12}
\frac{-1}{3}
\frac{2}{3}\pi
\frac{\pi}{6}
\frac{3\pi}{4}
3\pi/4
2\pi
\pi r^2
\sqrt{2}
2\sqrt{3}
-4\sqrt{5}
\sqrt[3]{5}
1+\sqrt{2}
3-2\sqrt{2}
\frac{1+\sqrt{5}}{2}
\frac{-b\pm\sqrt{b^2-4ac}}{2a}
\sqrt{\frac{2}{3}}
\frac{5\sqrt{2}}{3}
x^2+2x+1
(x+3)^2
(x+1)(x-1)
2x^3-3x^2+x-5
x^2-5x+6
3x+2y
a^2+b^2
2ab
x^{2}y^{3}
4x^2-9
(2x+3)^{2}
x(x+1)
-x^3+4x
\frac{x}{x-1}
x=5
x = -2
y=2x+3
y=-\frac{1}{2}x+4
x^2+y^2=25
(x-1)^2+(y+2)^2=9
x=\frac{1}{2}
a=3, b=4
x=1 \text{ or } x=2
x>3
x\le 5
x \leq -1
-2<x<3
x\geq 0
x \ge 2
0<x\leq1
x\neq 2
[-3,3]
(0,1)
[5,\infty)
(-\infty,3]
(-\infty,-1)\cup(1,\infty)
[0,1)\cup(2,3]
(-\infty, \infty)
\left(0, \frac{1}{2}\right]
\{1,2,3\}
\{-1, 1\}
\emptyset
(1,2)
(3,-4)
(1, 2, 3)
1, 2, 3
-2, 3
(2,\frac{1}{2})
\sin x
\cos(2x)
\tan\theta
\sin^2 x+\cos^2 x
2\sin x\cos x
\cos 60^\circ
\arcsin\frac{1}{2}
\sec x
\cot\frac{\pi}{4}
\log_2 8
\log_{3} 27
\ln 2
\log(x+1)
\log 100
e^{x}
e^{-2}
2e
e^{i\pi}
30^\circ
45^{\circ}
120^\circ
50\%
12.5\%
12\text{ cm}
5\text{ dollars}
\$5.00
\$1,250
18 \text{ square units}
\text{(A)}
\text{B}
\textbf{(C)}
\mathrm{D}
3+4i
2-i
-i
\frac{1}{2}+\frac{\sqrt{3}}{2}i
(1+i)^2
\begin{pmatrix} 1 \\ 2 \end{pmatrix}
\begin{pmatrix} 1 & 2 \\ 3 & 4 \end{pmatrix}
\begin{bmatrix} 0 & -1 \\ 1 & 0 \end{bmatrix}
\begin{pmatrix} -\frac{1}{3} \\ \frac{2}{3} \\ 0 \end{pmatrix}
|x|
|x-1|
\left| -5 \right|
n!
5!
\binom{5}{2}
\dbinom{10}{3}
{n \choose k}
\pm 2
\pm\sqrt{3}
2 \pm \sqrt{7}
\infty
-\infty
a_n = 2n+1
a_{n+1}=3a_n
f(x)=x^2
f^{-1}(x)=\frac{x-3}{2}
g(2)
f(g(x))
3\cdot 4
6 \times 7
12 \div 4
2^{10}
3^{-2}
(-2)^3
10^{-3}
\left(\frac{1}{2}\right)^{3}
\left[ 0, 1 \right]
\mathbb{R}
x\in\mathbb{R}
\overline{AB}
\angle ABC
\triangle ABC
\lfloor x \rfloor
\lceil 2.5\rceil
\sum_{i=1}^{n} i
\int_0^1 x\,dx
\lim_{x\to 0} \frac{\sin x}{x}
x'
f'(x)=2x
0.\overline{3}
1.\overline{27}
\frac{m}{n}
m+n
\dfrac{1}{\sqrt{2}}
\frac{\sqrt{6}-\sqrt{2}}{4}
\sqrt{x^2+1}
x^{\frac{1}{2}}
\sqrt{a}\sqrt{b}
\frac{dy}{dx}=3x^2
xy=12
2^{x}=8
\log_{2}(x)=3
\frac{a}{b}+\frac{c}{d}
\frac{1}{x}+\frac{1}{y}
(a+b)^{2}=a^{2}+2ab+b^{2}
P(A)=\frac{1}{6}
\frac{n(n+1)}{2}
n^2-n
2^n-1
\text{odd}
\text{no solution}
\text{Monday}
x=\pm 3
x = 2, y = -1
(x, y) = (1, 2)
r = 4
V = \frac{4}{3}\pi r^3
A = 36\pi
\frac{\sqrt{2}}{2}
-\frac{\sqrt{3}}{3}
\cos\theta = \frac{4}{5}
k = -\frac{1}{2}
2023
\{x \mid x > 0\}
x \in [1, 3]
9:45
2\frac{3}{4}
7 \frac{1}{8}
\frac{12}{35}
-\frac{7}{90}
x - 7
5x + 12
""".splitlines() if s)


def dfa_states() -> int:
    """DFA states cached so far by latex2sympy2_extended's parser and lexer (this process)."""
    from latex2sympy2_extended.antlr_parser import PSLexer, PSParser

    return sum(len(d._states) for cls in (PSParser, PSLexer) for d in cls.decisionsToDFA)


def warm_parser(shapes: tuple[str, ...] = LATEX_SHAPES) -> float:
    """Parse every shape as math-verify parses a response's ``$...$`` (extraction,
    normalisation, then ANTLR and the visitor): the DFA learns the normalised token
    sequences a worker will meet. Errors are expected for a few shapes and ignored (the
    warm-up only caches predictions). Returns the seconds it took."""
    from math_verify import parse

    t0 = time.perf_counter()
    for s in shapes:
        try:
            parse(f"${s}$", parsing_timeout=None)  # type: ignore[arg-type]
        except Exception:  # a shape that does not parse has still warmed what it met
            continue
    return time.perf_counter() - t0
