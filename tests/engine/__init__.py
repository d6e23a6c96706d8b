"""Tests of the scheduling engine (placer.engine); the plugins' own tests sit beside them."""
