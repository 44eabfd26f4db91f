package com.example.slugs;

import static org.junit.Assert.assertEquals;

import org.junit.Test;

public class SlugsTest {
  @Test
  public void lowerCasesWords() {
    assertEquals("hello-world", Slugs.slugify("Hello World"));
  }

  @Test
  public void removesAccents() {
    assertEquals("creme-brulee", Slugs.slugify("Crème Brûlée"));
  }

  @Test
  public void collapsesPunctuation() {
    assertEquals("what-s-new-in-2024", Slugs.slugify("What's new -- in 2024?!"));
  }
}
