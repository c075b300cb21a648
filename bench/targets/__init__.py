"""The targets' room: the ratios the performance issues target, each measured against a
baseline that shares the same cores, and the floors that bound them.

* ``ratios``: the service ÷ the stock pair and ÷ verl PR #5839's pattern (section ``targets``);
* ``per_sample``: per-sample traffic and the server's CPU per request (section ``per_sample``);
* ``overhead``: the single-item round trip (section ``overhead``);
* ``floor_app``: the zero-cost and relay apps those floors are measured with;
* ``summary``: every target read from the sections' figures, with its bracket (printed last).
"""
