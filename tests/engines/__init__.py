"""Tests of the engines' own pieces: the seed miniatures, the suites derived for them."""
