const { test } = require('uvu');
const assert = require('uvu/assert');
const { sum } = require('../src/sum.js');

test('sums a list', () => {
  assert.is(sum([1, 2, 3]), 6);
});

test('sums nothing to zero', () => {
  assert.is(sum([]), 0);
});

test.run();
